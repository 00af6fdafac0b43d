package perf

import (
	"fmt"
	"math"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// peers are the single-node peer locks that lease is held against: the
// best of them (by the figure at hand) is "the best peer".
var peers = []string{"redsync-1", "redislock", "rueidislock"}

// maxPubSubPerClient is the most pub/sub connections 1,000 waiters of one
// lease Client may use.
const maxPubSubPerClient = 2

// targetSet builds the targets of one run.
type targetSet struct {
	rs  []report.Result
	out []report.Target
}

// ratioOf is a's figure over b's: the median of the paired ratios when
// both ran interleaved (rounds > 0), else the ratio of the whole figures.
func ratioOf(a, b *report.Result, fig func(*report.Result) *float64) (r *float64, rounds int) {
	if p := report.Paired(a, b); p != nil {
		s, _ := report.SpreadOf(a)
		return p, s.Rounds
	}
	x, y := report.Field(a, fig), report.Field(b, fig)
	if x == nil || y == nil || *y <= 0 {
		return nil, 0
	}
	return report.Ptr(*x / *y), 0
}

// fmtFig is a figure with its unit; a wake of 0 µs is said in words.
func fmtFig(v float64, unit string) string {
	switch unit {
	case "µs":
		if v == 0 {
			return "before release returned"
		}
		return report.WakeText(&v)
	case "ms":
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

// add appends a target with the verdict ratio <= limit (>= when atLeast);
// a nil ratio is a missing figure.
func (ts *targetSet) add(name string, ratio *float64, limit float64, atLeast bool, measured string) {
	t := report.Target{Name: name, Limit: limit, Measured: "missing figure"}
	if ratio != nil && !math.IsNaN(*ratio) {
		met := *ratio <= limit
		if atLeast {
			met = *ratio >= limit
		}
		t.Ratio, t.Met, t.Measured = ratio, &met, measured
	}
	ts.out = append(ts.out, t)
}

// compare adds the target a/b <= limit (>= when atLeast) on fig, paired
// where both ran interleaved.
func (ts *targetSet) compare(name string, a, b *report.Result, fig func(*report.Result) *float64, unit string, limit float64, atLeast bool) {
	r, rounds := ratioOf(a, b, fig)
	if r == nil {
		ts.add(name, nil, limit, atLeast, "")
		return
	}
	how := "ratio of the run's figures"
	if rounds > 0 {
		how = fmt.Sprintf("median of %d paired rounds", rounds)
	}
	fa, fb := report.Field(a, fig), report.Field(b, fig)
	m := fmt.Sprintf("%.2f×, %s (%s %s, %s %s)", *r, how, a.Lock, fmtFig(*fa, unit), b.Lock, fmtFig(*fb, unit))
	if unit == "µs" && *fa == 0 {
		m = fmt.Sprintf("%s's waiter had the lock before the release returned (p50); %s %s after (%s)", a.Lock, b.Lock, fmtFig(*fb, unit), how)
	}
	ts.add(name, r, limit, atLeast, m)
}

// targets checks the targets against rs and the sleep ceilings,
// in the order of the report's questions: uncontended, parallel, fairness,
// wake, waiters, databases.
func targets(rs, ceilings []report.Result) []report.Target {
	ts := &targetSet{rs: rs}
	get := func(lock, scen string) *report.Result { return report.Find(rs, lock, scen) }
	lease := func(scen string) *report.Result { return get("lease", scen) }

	ts.compare("lease uncontended p50 ≤ 1.05× best peer", lease("uncontended"), bestPeer(rs, "uncontended", p50, true), p50, "µs", 1.05, false)
	ts.compare("lease uncontended p50 ≤ 1.15× raw", lease("uncontended"), get("raw", "uncontended"), p50, "µs", 1.15, false)
	ts.compare("redlock-5 uncontended p50 ≤ redsync-5", get("redlock-5", "uncontended"), get("redsync-5", "uncontended"), p50, "µs", 1, false)
	ts.compare("lease parallel ≥ best peer", lease("parallel"), bestPeer(rs, "parallel", ops, false), ops, "ops/s", 1, true)
	ts.compare("lease parallel ≥ 0.9× raw", lease("parallel"), get("raw", "parallel"), ops, "ops/s", 0.9, true)
	ts.compare("redlock-5 parallel ≥ redsync-5", get("redlock-5", "parallel"), get("redsync-5", "parallel"), ops, "ops/s", 1, true)

	for _, s := range []string{"hotkey", "hotkey64"} {
		w := hotkeyWorkers[s]
		what := fmt.Sprintf("lease %s (%d workers)", s, w)
		ts.compare(what+" ≥ best peer (stretch 1.15×)", lease(s), bestPeer(rs, s, ops, false), ops, "cs/s", 1, true)
		if t := &ts.out[len(ts.out)-1]; t.Ratio != nil {
			t.Measured += map[bool]string{true: "; stretch met", false: "; stretch not met"}[*t.Ratio >= 1.15]
		}
		var ceiling *report.Result
		for i := range ceilings {
			if ceilings[i].Scenario == s {
				ceiling = &ceilings[i]
			}
		}
		ts.compare(what+" ≥ 0.85× sleep ceiling", lease(s), ceiling, ops, "cs/s", 0.85, true)
		fair := 1 / float64(w)
		var worst *float64
		m := ""
		if r := lease(s); r != nil && r.MinShare != nil && r.MaxShare != nil {
			// the share furthest from fair, as a multiple of fair
			lo, hi := *r.MinShare/fair, *r.MaxShare/fair
			worst = report.Ptr(lo)
			if hi-1 > 1-lo {
				worst = report.Ptr(hi)
			}
			m = fmt.Sprintf("shares %.3f–%.3f = %.2f–%.2f× fair (%.3f)", *r.MinShare, *r.MaxShare, lo, hi, fair)
		}
		t := report.Target{Name: what + " shares within 0.8–1.2× fair", Limit: 0.8, Measured: "missing figure"}
		if worst != nil {
			met := *worst >= 0.8 && *worst <= 1.2
			t.Ratio, t.Met, t.Measured = worst, &met, m
		}
		ts.out = append(ts.out, t)
	}

	wake := lease("wake")
	ts.compare("lease wake p50 ≤ best peer", wake, bestPeer(rs, "wake", p50, true), p50, "µs", 1, false)
	if w := report.Field(wake, p50); w != nil {
		ts.add("lease wake p50 < 500 µs", w, 500, false, fmtFig(*w, "µs"))
	} else {
		ts.add("lease wake p50 < 500 µs", nil, 500, false, "")
	}
	for _, f := range []struct {
		peer  string
		times float64
	}{{"redislock", 20}, {"redsync-1", 200}} {
		name := fmt.Sprintf("lease wake ≥ %.0f× faster than %s", f.times, f.peer)
		peer := get(f.peer, "wake")
		r, rounds := ratioOf(wake, peer, p50)
		if r == nil {
			ts.add(name, nil, 1/f.times, false, "")
			continue
		}
		how := "ratio of the run's figures"
		if rounds > 0 {
			how = fmt.Sprintf("median of %d paired rounds", rounds)
		}
		m := fmt.Sprintf("%.0f× faster, %s (%s, %s %s)", 1 / *r, how, fmtFig(*wake.P50us, "µs"), f.peer, fmtFig(*peer.P50us, "µs"))
		if *r == 0 {
			m = fmt.Sprintf("lease's waiter had the lock before the release returned; %s's %s after (%s)", f.peer, fmtFig(*peer.P50us, "µs"), how)
		}
		ts.add(name, r, 1/f.times, false, m)
	}

	t := report.Target{Name: fmt.Sprintf("lease waiters: ≤ %d pub/sub conns per Client", maxPubSubPerClient),
		Limit: maxPubSubPerClient, Measured: "missing figure"}
	if w := lease("waiters"); w != nil && w.PubSubConns != nil {
		n := float64(*w.PubSubConns)
		met := n <= maxPubSubPerClient
		t.Ratio, t.Met = &n, &met
		t.Measured = fmt.Sprintf("%d pub/sub of %d conns (%d waiters on %d keys, one Client)", *w.PubSubConns, deref(w.Conns), w.Workers, w.Keys)
		if w.Workers < 1000 {
			t.Measured += "; the target is for 1,000 waiters"
		}
	}
	ts.out = append(ts.out, t)
	rs5 := get("redsync-5", "waiters")
	for _, rl := range []string{"redlock-3", "redlock-5"} {
		t := report.Target{Name: rl + " waiters: all acquired, no slower than redsync-5", Limit: 1, Measured: "missing figure"}
		if w := get(rl, "waiters"); w != nil && w.Workers > 0 {
			all := w.AllAcquiredMs != nil
			r := float64(w.Samples) / float64(w.Workers)
			t.Measured = fmt.Sprintf("%d of %d acquired", w.Samples, w.Workers)
			if all {
				t.Measured += " in " + fmtFig(*w.AllAcquiredMs, "ms")
				if rs5 != nil && rs5.AllAcquiredMs != nil && *rs5.AllAcquiredMs > 0 {
					r = *rs5.AllAcquiredMs / *w.AllAcquiredMs // ≥ 1: no slower
					t.Measured += fmt.Sprintf(", redsync-5 in %s", fmtFig(*rs5.AllAcquiredMs, "ms"))
				}
			} else if w.Errors > 0 {
				t.Measured += " (" + report.ErrorCause(w.FirstErr) + ")"
			}
			met := all && r >= 1
			t.Ratio, t.Met = &r, &met
		}
		ts.out = append(ts.out, t)
	}

	ratio := func(name string, num, den *float64, limit float64, atLeast bool, what string) {
		m := ""
		if num != nil && den != nil {
			m = fmt.Sprintf("%.2f× (%s)", *num / *den, fmt.Sprintf(what, *num, *den))
		}
		var r *float64
		if num != nil && den != nil && *den > 0 {
			r = report.Ptr(*num / *den)
		}
		ts.add(name, r, limit, atLeast, m)
	}
	getF := func(lock, scen string, f func(*report.Result) *float64) *float64 {
		return report.Field(get(lock, scen), f)
	}
	ratio("pg_guarded p50 ≤ 1.2× pg_unguarded", getF("postgres", "pg_guarded", p50), getF("postgres", "pg_unguarded", p50), 1.2, false, "%.1f µs / %.1f µs")
	ratio("pg_perrow p50 ≤ 1.3× pg_unguarded", getF("postgres", "pg_perrow", p50), getF("postgres", "pg_unguarded", p50), 1.3, false, "%.1f µs / %.1f µs")
	for _, db := range []string{"mariadb", "postgres-sql"} {
		ratio("sql_guarded p50 ≤ 1.3× sql_unguarded ("+db+")", getF(db, "sql_guarded", p50), getF(db, "sql_unguarded", p50), 1.3, false, "%.1f µs / %.1f µs")
		ratio("sql_perrow p50 ≤ 1.3× sql_unguarded ("+db+")", getF(db, "sql_perrow", p50), getF(db, "sql_unguarded", p50), 1.3, false, "%.1f µs / %.1f µs")
	}
	return ts.out
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
