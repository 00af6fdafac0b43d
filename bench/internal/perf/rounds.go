package perf

import (
	"context"
	"math"

	"github.com/fencelock/fencelock/bench/internal/report"
)

// interleave runs measure for each of names in turn, round after round,
// and returns the figure each returned, per name and round (NaN when the
// run was cut short). Each round starts one name further on (raw, lease,
// a peer; lease, a peer, raw; ...), so no name always follows the same
// neighbour (and the load it leaves behind). Each slice is short and every
// name has one in each round, so a change in the machine's load weighs on
// all of them alike, and the figures of one round can be compared as
// pairs (report.Paired). measure gets the round and the index of the name
// in names.
func interleave(ctx context.Context, run *runner, scenario string, rounds int, names []string, measure func(round, i int) float64) []report.Figures {
	figs := make([]report.Figures, len(names))
	for i := range figs {
		figs[i] = make(report.Figures, rounds)
		for r := range figs[i] {
			figs[i][r] = math.NaN()
		}
	}
	for round := range rounds {
		for j := range names {
			i := (j + round) % len(names)
			if ctx.Err() != nil {
				return figs
			}
			run.step(scenario, names[i], round+1, rounds)
			figs[i][round] = measure(round, i)
		}
	}
	return figs
}

// pairUp fills VsRaw, VsBest and BestPeer of every result of rs that ran,
// from their PerRound: the medians of the paired ratios to raw and to the
// best peer of the run (by fig; lower says a lower figure is better).
func pairUp(rs []report.Result, fig func(*report.Result) *float64, lower bool) {
	if len(rs) == 0 {
		return
	}
	raw := report.Find(rs, "raw", rs[0].Scenario)
	best := bestPeer(rs, rs[0].Scenario, fig, lower)
	for i := range rs {
		if rs[i].Skipped {
			continue
		}
		rs[i].VsRaw = report.PairedRatio(&rs[i], raw)
		if best != nil {
			rs[i].VsBest, rs[i].BestPeer = report.PairedRatio(&rs[i], best), best.Lock
		}
	}
}

// bestPeer is the result of the peer (of peers) with the best figure in
// scen: the lowest when lower, else the highest; nil when none has one.
func bestPeer(rs []report.Result, scen string, fig func(*report.Result) *float64, lower bool) *report.Result {
	var best *report.Result
	for _, p := range peers {
		r := report.Find(rs, p, scen)
		x := report.Field(r, fig)
		if x == nil {
			continue
		}
		if b := fig(orZero(best)); best == nil || b == nil || (lower && *x < *b) || (!lower && *x > *b) {
			best = r
		}
	}
	return best
}

func orZero(r *report.Result) *report.Result {
	if r == nil {
		return &report.Result{}
	}
	return r
}

// The figures of a Result.
var (
	p50 = func(r *report.Result) *float64 { return r.P50us }
	ops = func(r *report.Result) *float64 { return r.OpsPerSec }
)
