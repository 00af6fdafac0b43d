package perf

import (
	"fmt"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// peers are the single-node peer locks that lease is held against: the
// best of them (by the figure at hand) is "the best peer".
var peers = []string{"redsync-1", "redislock", "rueidislock"}

// maxPubSubPerClient is the most pub/sub connections 1,000 waiters of one
// lease Client may use.
const maxPubSubPerClient = 2

// targets checks the targets against rs.
func targets(rs []report.Result) []report.Target {
	get := func(lock, scen string, f func(*report.Result) *float64) *float64 {
		return report.Field(report.Find(rs, lock, scen), f)
	}
	p50 := func(r *report.Result) *float64 { return r.P50us }
	ops := func(r *report.Result) *float64 { return r.OpsPerSec }

	var out []report.Target
	// ratio adds the target num/den <= limit (or >= limit when atLeast).
	ratio := func(name string, num, den *float64, limit float64, atLeast bool, what string) {
		t := report.Target{Name: name, Limit: limit, Measured: "missing figure"}
		if num != nil && den != nil && *den > 0 {
			r := *num / *den
			met := r <= limit
			if atLeast {
				met = r >= limit
			}
			t.Ratio, t.Met = &r, &met
			t.Measured = fmt.Sprintf("%.2f× (%s)", r, fmt.Sprintf(what, *num, *den))
		}
		out = append(out, t)
	}
	// best returns the best peer's figure in scen (the highest, or the
	// lowest when lower is better) and which peer it is.
	best := func(scen string, f func(*report.Result) *float64, lower bool) (*float64, string) {
		var v *float64
		who := ""
		for _, p := range peers {
			x := get(p, scen, f)
			if x != nil && (v == nil || (lower && *x < *v) || (!lower && *x > *v)) {
				v, who = x, p
			}
		}
		return v, who
	}
	// vsBest adds the target lease/best-peer <= limit (>= when atLeast).
	vsBest := func(name, scen string, f func(*report.Result) *float64, limit float64, atLeast bool, verb, unit string) {
		v, who := best(scen, f, !atLeast)
		ratio(name, get("lease", scen, f), v, limit, atLeast, "lease "+verb+" / "+who+" "+verb+" "+unit)
	}
	vsBest("lease hotkey (8 workers) ≥ 1.15× best peer", "hotkey", ops, 1.15, true, "%.0f", "cs/s")
	vsBest("lease hotkey64 (64 workers) ≥ 1.15× best peer", "hotkey64", ops, 1.15, true, "%.0f", "cs/s")
	vsBest("lease parallel ≥ best peer", "parallel", ops, 1, true, "%.0f", "ops/s")
	vsBest("lease uncontended p50 ≤ 1.05× best peer", "uncontended", p50, 1.05, false, "%.1f", "µs")
	vsBest("lease wake p50 ≤ best peer", "wake", p50, 1, false, "%.1f", "µs")

	t := report.Target{Name: fmt.Sprintf("lease waiters: ≤ %d pub/sub conns per Client", maxPubSubPerClient),
		Limit: maxPubSubPerClient, Measured: "missing figure"}
	if w := report.Find(rs, "lease", "waiters"); w != nil && w.PubSubConns != nil {
		n := float64(*w.PubSubConns)
		met := n <= maxPubSubPerClient
		t.Ratio, t.Met = &n, &met
		t.Measured = fmt.Sprintf("%d pub/sub of %d conns (%d waiters on %d keys, one Client)", *w.PubSubConns, deref(w.Conns), w.Workers, w.Keys)
		if w.Workers < 1000 {
			t.Measured += "; the target is for 1,000 waiters"
		}
	}
	out = append(out, t)

	ratio("lease uncontended p50 ≤ 1.15× raw", get("lease", "uncontended", p50), get("raw", "uncontended", p50), 1.15, false, "%.1f µs / %.1f µs")
	ratio("lease parallel ≥ 0.9× raw", get("lease", "parallel", ops), get("raw", "parallel", ops), 0.9, true, "%.0f / %.0f ops/s")

	wake := get("lease", "wake", p50)
	t = report.Target{Name: "lease wake p50 < 500 µs", Limit: 500, Measured: "missing figure"}
	if wake != nil {
		met := *wake < 500
		t.Ratio, t.Met, t.Measured = wake, &met, fmt.Sprintf("%.1f µs", *wake)
	}
	out = append(out, t)
	ratio("lease wake ≥ 20× faster than redislock", get("redislock", "wake", p50), wake, 20, true, "%.0f µs / %.1f µs")
	ratio("lease wake ≥ 200× faster than redsync-1", get("redsync-1", "wake", p50), wake, 200, true, "%.0f µs / %.1f µs")
	ratio("redlock-5 uncontended p50 ≤ redsync-5", get("redlock-5", "uncontended", p50), get("redsync-5", "uncontended", p50), 1, false, "%.1f µs / %.1f µs")
	ratio("pg_guarded p50 ≤ 1.2× pg_unguarded", get("postgres", "pg_guarded", p50), get("postgres", "pg_unguarded", p50), 1.2, false, "%.1f µs / %.1f µs")
	ratio("pg_perrow p50 ≤ 1.3× pg_unguarded", get("postgres", "pg_perrow", p50), get("postgres", "pg_unguarded", p50), 1.3, false, "%.1f µs / %.1f µs")
	for _, db := range []string{"mariadb", "postgres-sql"} {
		ratio("sql_guarded p50 ≤ 1.3× sql_unguarded ("+db+")", get(db, "sql_guarded", p50), get(db, "sql_unguarded", p50), 1.3, false, "%.1f µs / %.1f µs")
		ratio("sql_perrow p50 ≤ 1.3× sql_unguarded ("+db+")", get(db, "sql_perrow", p50), get(db, "sql_unguarded", p50), 1.3, false, "%.1f µs / %.1f µs")
	}
	return out
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
