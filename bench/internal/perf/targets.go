package perf

import (
	"fmt"
	"math"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// peers are the single-node peer locks that lease is held against: the
// best of them (by the figure at hand) is "the best peer".
var peers = []string{"redsync-1", "redislock", "rueidislock"}

// maxAllocsPerOp and maxCmdsPerOp bound what one uncontended acquire+release
// of the lease (fair and fenced, its defaults) may cost: allocations in
// the process, and commands its Redis runs.
const (
	maxAllocsPerOp = 40
	maxCmdsPerOp   = 7
)

// maxPubSubPerClient is the most pub/sub connections 1,000 waiters of one
// lease Client may use.
const maxPubSubPerClient = 2

// targetSet builds the targets of one run.
type targetSet struct {
	rs  []report.Result
	out []report.Target
}

// how says how report.Ratio got a ratio from pairs paired rounds.
func how(pairs int) string {
	if pairs > 0 {
		return fmt.Sprintf("median of %d paired rounds", pairs)
	}
	return "ratio of the run's figures"
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

// cmp is how a target's ratio is held against its limit.
type cmp int

const (
	atMost  cmp = iota // ratio ≤ limit
	atLeast            // ratio ≥ limit
	below              // ratio < limit
)

func (c cmp) met(ratio, limit float64) bool {
	switch c {
	case atLeast:
		return ratio >= limit
	case below:
		return ratio < limit
	}
	return ratio <= limit
}

// add appends a target with the verdict c of ratio against limit; a nil
// (or not finite) ratio is a missing figure.
func (ts *targetSet) add(name string, ratio *float64, limit float64, c cmp, measured string) {
	t := report.Target{Name: name, Limit: limit, Measured: "missing figure"}
	if ratio != nil && !math.IsNaN(*ratio) && !math.IsInf(*ratio, 0) {
		met := c.met(*ratio, limit)
		t.Ratio, t.Met, t.Measured = ratio, &met, measured
	}
	ts.out = append(ts.out, t)
}

// compare adds the target a/b against limit on fig, paired where both ran
// interleaved. The write shapes of a database are named by their scenario.
func (ts *targetSet) compare(name string, a, b *report.Result, fig func(*report.Result) *float64, unit string, limit float64, c cmp) {
	r, pairs := report.Ratio(a, b, fig)
	if r == nil {
		ts.add(name, nil, limit, c, "")
		return
	}
	an, bn := a.Lock, b.Lock
	if report.IsWriteShape(*a) {
		an, bn = a.Scenario, b.Scenario
	}
	fa, fb := report.Field(a, fig), report.Field(b, fig)
	m := fmt.Sprintf("%.2f×, %s (%s %s, %s %s)", *r, how(pairs), an, fmtFig(*fa, unit), bn, fmtFig(*fb, unit))
	if unit == "µs" && *fa == 0 {
		m = fmt.Sprintf("%s's waiter had the lock before the release returned (p50); %s %s after (%s)", an, bn, fmtFig(*fb, unit), how(pairs))
	}
	ts.add(name, r, limit, c, m)
}

// wakeVsZero judges a wake target of lease against peer when the peer's
// p50 is 0 (its waiter had the lock before the release returned), where
// no ratio can be had: lease is missed unless its p50 is 0 too. It
// reports whether it did.
func (ts *targetSet) wakeVsZero(name string, lease, peer *report.Result, limit float64) bool {
	l, p := report.Field(lease, p50), report.Field(peer, p50)
	if l == nil || p == nil || *p > 0 {
		return false
	}
	met := *l <= 0
	m := fmt.Sprintf("lease %s after the release; %s's waiter had the lock before the release returned (p50)", fmtFig(*l, "µs"), peer.Lock)
	if met {
		m = fmt.Sprintf("lease's and %s's waiters both had the lock before the release returned (p50)", peer.Lock)
	}
	ts.out = append(ts.out, report.Target{Name: name, Limit: limit, Measured: m, Met: &met})
	return true
}

// targets checks the targets against rs and the sleep ceilings,
// in the order of the report's questions: uncontended, parallel, fairness,
// wake, waiters, databases.
func targets(rs, ceilings []report.Result) []report.Target {
	ts := &targetSet{rs: rs}
	get := func(lock, scen string) *report.Result { return report.Find(rs, lock, scen) }
	lease := func(scen string) *report.Result { return get("lease", scen) }

	ts.compare("lease uncontended p50 ≤ 1.05× best peer", lease("uncontended"), bestPeer(rs, "uncontended", p50, true), p50, "µs", 1.05, atMost)
	ts.compare("lease uncontended p50 ≤ 1.15× raw", lease("uncontended"), get("raw", "uncontended"), p50, "µs", 1.15, atMost)
	ts.compare("redlock-5 uncontended p50 ≤ redsync-5", get("redlock-5", "uncontended"), get("redsync-5", "uncontended"), p50, "µs", 1, atMost)
	c := lease("cost")
	for _, f := range []struct {
		name  string
		fig   *float64
		limit float64
	}{{"allocations", report.Field(c, func(r *report.Result) *float64 { return r.AllocsPerOp }), maxAllocsPerOp},
		{"server commands", report.Field(c, func(r *report.Result) *float64 { return r.CmdsPerOp }), maxCmdsPerOp}} {
		m := ""
		if f.fig != nil {
			m = fmt.Sprintf("%.1f %s per acquire+release", *f.fig, f.name)
			if f.name == "server commands" {
				m += ": " + report.CommandsText(c.Commands)
			}
		}
		ts.add(fmt.Sprintf("lease (fair, fenced) ≤ %.0f %s per acquire+release", f.limit, f.name), f.fig, f.limit, atMost, m)
	}
	ts.compare("lease parallel ≥ best peer", lease("parallel"), bestPeer(rs, "parallel", ops, false), ops, "ops/s", 1, atLeast)
	ts.compare("lease parallel ≥ 0.9× raw", lease("parallel"), get("raw", "parallel"), ops, "ops/s", 0.9, atLeast)
	ts.compare("redlock-5 parallel ≥ redsync-5", get("redlock-5", "parallel"), get("redsync-5", "parallel"), ops, "ops/s", 1, atLeast)

	for _, s := range []string{"hotkey", "hotkey64"} {
		w := hotkeyWorkers[s]
		what := fmt.Sprintf("lease %s (%d workers)", s, w)
		ts.compare(what+" ≥ best peer (stretch 1.15×)", lease(s), bestPeer(rs, s, ops, false), ops, "cs/s", 1, atLeast)
		if t := &ts.out[len(ts.out)-1]; t.Ratio != nil {
			t.Measured += map[bool]string{true: "; stretch met", false: "; stretch not met"}[*t.Ratio >= 1.15]
		}
		var ceiling *report.Result
		for i := range ceilings {
			if ceilings[i].Scenario == s {
				ceiling = &ceilings[i]
			}
		}
		ts.compare(what+" ≥ 0.85× sleep ceiling", lease(s), ceiling, ops, "cs/s", 0.85, atLeast)
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
	// A peer whose p50 is 0 (before the release returned) gives no ratio:
	// wakeVsZero judges those.
	if name, best := "lease wake p50 ≤ best peer", bestPeer(rs, "wake", p50, true); !ts.wakeVsZero(name, wake, best, 1) {
		ts.compare(name, wake, best, p50, "µs", 1, atMost)
	}
	if w := report.Field(wake, p50); w != nil {
		ts.add("lease wake p50 < 500 µs", w, 500, below, fmtFig(*w, "µs"))
	} else {
		ts.add("lease wake p50 < 500 µs", nil, 500, below, "")
	}
	for _, f := range []struct {
		peer  string
		times float64
	}{{"redislock", 20}, {"redsync-1", 200}} {
		name := fmt.Sprintf("lease wake ≥ %.0f× faster than %s", f.times, f.peer)
		peer := get(f.peer, "wake")
		if ts.wakeVsZero(name, wake, peer, 1/f.times) {
			continue
		}
		r, pairs := report.Ratio(wake, peer, p50)
		if r == nil {
			ts.add(name, nil, 1/f.times, atMost, "")
			continue
		}
		m := fmt.Sprintf("%.0f× faster, %s (%s, %s %s)", 1 / *r, how(pairs), fmtFig(*wake.P50us, "µs"), f.peer, fmtFig(*peer.P50us, "µs"))
		if *r == 0 {
			m = fmt.Sprintf("lease's waiter had the lock before the release returned; %s's %s after (%s)", f.peer, fmtFig(*peer.P50us, "µs"), how(pairs))
		}
		ts.add(name, r, 1/f.times, atMost, m)
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
			t.Measured = fmt.Sprintf("%d of %d acquired", w.Samples, w.Workers)
			switch {
			case w.AllAcquiredMs == nil: // not all acquired: missed, whatever redsync-5 did
				if w.Errors > 0 {
					t.Measured += " (" + report.ErrorCause(w.FirstErr) + ")"
				}
				r, met := float64(w.Samples)/float64(w.Workers), false
				t.Ratio, t.Met = &r, &met
			case rs5 == nil || rs5.AllAcquiredMs == nil: // nothing to compare with: n/a
				t.Measured += " in " + fmtFig(*w.AllAcquiredMs, "ms") + "; redsync-5 not measured"
			default:
				t.Measured += fmt.Sprintf(" in %s, redsync-5 in %s", fmtFig(*w.AllAcquiredMs, "ms"), fmtFig(*rs5.AllAcquiredMs, "ms"))
				met := *w.AllAcquiredMs <= *rs5.AllAcquiredMs
				t.Met = &met
				if *w.AllAcquiredMs > 0 {
					t.Ratio = report.Ptr(*rs5.AllAcquiredMs / *w.AllAcquiredMs) // ≥ 1: no slower
				}
			}
		}
		ts.out = append(ts.out, t)
	}

	// The write shapes took turns in rounds: paired like the locks.
	ts.compare("pg_guarded p50 ≤ 1.2× pg_unguarded", get("postgres", "pg_guarded"), get("postgres", "pg_unguarded"), p50, "µs", 1.2, atMost)
	ts.compare("pg_perrow p50 ≤ 1.3× pg_unguarded", get("postgres", "pg_perrow"), get("postgres", "pg_unguarded"), p50, "µs", 1.3, atMost)
	for _, db := range []string{"mariadb", "postgres-sql"} {
		ts.compare("sql_guarded p50 ≤ 1.3× sql_unguarded ("+db+")", get(db, "sql_guarded"), get(db, "sql_unguarded"), p50, "µs", 1.3, atMost)
		ts.compare("sql_perrow p50 ≤ 1.3× sql_unguarded ("+db+")", get(db, "sql_perrow"), get(db, "sql_unguarded"), p50, "µs", 1.3, atMost)
	}
	return ts.out
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
