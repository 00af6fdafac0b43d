package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func fmtF(format string) func(*float64) string {
	return func(p *float64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprintf(format, *p)
	}
}

var (
	fmtOps   = fmtF("%.0f")
	fmtCPU   = fmtF("%.3f") // CPU seconds per second
	fmtMs    = fmtF("%.1f")
	fmtShare = fmtF("%.3f")
)

func fmtInt(p *int) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprint(*p)
}

// The figures of a Result, for Field.
var (
	p50      = func(r *Result) *float64 { return r.P50us }
	p99      = func(r *Result) *float64 { return r.P99us }
	ops      = func(r *Result) *float64 { return r.OpsPerSec }
	minShare = func(r *Result) *float64 { return r.MinShare }
	maxShare = func(r *Result) *float64 { return r.MaxShare }
)

// WritePerfTable prints the results, one row per lock, then the waiters
// and pg tables and the targets.
func WritePerfTable(w io.Writer, rep *Perf) {
	fmt.Fprintf(w, "%s\n\n", rep.TextLine())
	rs := rep.Results
	var main []Result // the scenarios of the main table
	for _, r := range rs {
		if r.Scenario != "waiters" {
			main = append(main, r)
		}
	}
	if rows := lockRows(main); len(rows) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "lock\tuncontended p50 µs\tp99 µs\tparallel ops/s\twake p50 µs\tp99 µs\t"+
			"hotkey cs/s\tmin share\tmax share\thotkey64 cs/s\tmin share\tmax share\terrors\t")
		for _, n := range rows {
			u, p, wk := Find(rs, n, "uncontended"), Find(rs, n, "parallel"), Find(rs, n, "wake")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t", n, fmtUs(Field(u, p50)), fmtUs(Field(u, p99)),
				fmtOps(Field(p, ops)), fmtUs(Field(wk, p50)), fmtUs(Field(wk, p99)))
			for _, s := range []string{"hotkey", "hotkey64"} {
				h := Find(rs, n, s)
				fmt.Fprintf(tw, "%s\t%s\t%s\t", fmtOps(Field(h, ops)), fmtShare(Field(h, minShare)), fmtShare(Field(h, maxShare)))
			}
			// waiters has its own table.
			fmt.Fprintf(tw, "%s\t\n", errorsOf(rs, func(r *Result) bool { return r.Lock == n && r.Scenario != "waiters" }))
		}
		tw.Flush()
	}

	ws := waiterResults(rep)
	if len(ws) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "waiters\twaiting\tkeys\tconns\tpub/sub\tserver conns\tCPU s/s\tacquired\tall acquired ms\terrors\t")
		for _, r := range ws {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.Lock, r.Workers, r.Keys,
				fmtInt(r.Conns), fmtInt(r.PubSubConns), fmtInt(r.ServerConns), fmtCPU(r.CPUPerSec), r.Samples,
				fmtMs(r.AllAcquiredMs), errorsOf([]Result{r}, func(*Result) bool { return true }))
		}
		tw.Flush()
	}

	var shapes []Result
	for _, r := range rs {
		if IsWriteShape(r) {
			shapes = append(shapes, r)
		}
	}
	if len(shapes) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "database\twrite\tp50 µs\tp99 µs\ttx/s\t")
		for _, r := range shapes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.Lock, r.Scenario, fmtUs(r.P50us), fmtUs(r.P99us), fmtOps(r.OpsPerSec))
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nwake, hotkey, waiters: raw, naive and setnx-getset have no waiting acquire. hotkey: 8 workers on one key, 1 ms held; fair share 0.125; hotkey64: 64 workers, fair 0.016.")
	fmt.Fprintln(w, "errors: the count, and the cause of the first error of the scenario with the most (the JSON has every first error).")
	if len(ws) > 0 {
		fmt.Fprintln(w, "waiters: conns and pub/sub are the lock's own client's connections (CLIENT LIST, by name) while they wait; CPU s/s is the bench process's CPU time per wall second then; all acquired is from the holders' release to the last waiter's acquire.")
	}
	if rep.Quick {
		fmt.Fprintln(w, "-quick: small samples (wake < 100); a smoke run, not figures to quote.")
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		for _, t := range rep.Targets {
			fmt.Fprintf(w, "  %-6s %-48s %s\n", t.Verdict(), t.Name, t.Measured)
		}
	}
}

// waiterResults returns the waiters rows that ran.
func waiterResults(rep *Perf) []Result {
	var ws []Result
	for _, r := range rep.Results {
		if r.Scenario == "waiters" && !r.Skipped {
			ws = append(ws, r)
		}
	}
	return ws
}
