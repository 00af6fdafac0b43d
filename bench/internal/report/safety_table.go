package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// matrixCell is the compact terminal form of one cell:
// lost/stale ·overlaps, "!" when the data suffered, "err" when the cell
// did not run to the end, "—" when it was not run.
func matrixCell(c *SafetyResult) string {
	if c == nil {
		return "—"
	}
	s := fmt.Sprintf("%d/%d ·%d", c.LostUpdates, c.StaleAccepted, c.Overlaps)
	if c.Error != "" {
		s = "err"
	}
	if c.Bad() {
		s += "!"
	}
	return s
}

// count formats an anomaly count, with "!" when it is not zero.
func count(n int) string {
	if n > 0 {
		return fmt.Sprintf("%d!", n)
	}
	return fmt.Sprint(n)
}

// lockLabel is the lock's name, with "*" when it is fenced.
func lockLabel(l LockInfo) string {
	if l.Fenced {
		return l.Name + "*"
	}
	return l.Name
}

// WriteSafetyTable prints the safety report: a scenario × lock matrix,
// the long table of every cell, and the must-hold verdict.
func WriteSafetyTable(w io.Writer, rep *Safety) {
	fmt.Fprintf(w, "%s\n\n", rep.TextLine(rep.facts(false)...))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "scenario\t")
	for _, l := range rep.Locks {
		fmt.Fprintf(tw, "%s\t", lockLabel(l))
	}
	fmt.Fprintln(tw)
	for _, s := range rep.Scenarios {
		fmt.Fprintf(tw, "%s\t", s.Name)
		for _, l := range rep.Locks {
			fmt.Fprintf(tw, "%s\t", matrixCell(rep.Result(s.Name, l.Name)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncell: lost updates/stale writes accepted ·overlaps; ! the data suffered (lost or stale > 0);")
	fmt.Fprintln(w, "err: did not run to the end (counts below); —: not run.   * fenced: token checked by the verifier")
	fmt.Fprintln(w, "healed (long table): acked writes whose first token was refused and that landed after heal.Write reissued it")
	for _, l := range rep.Locks {
		if l.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", l.Name, l.Note)
		}
	}
	if rep.Quick {
		fmt.Fprintln(w, "-quick: few rounds; a smoke run, not figures to quote.")
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tlock\tops\tacked\thealed\trejected\tfailed\tlost_updates\tstale_accepted\toverlaps\tseconds\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%.1f\t", r.Scenario, r.Lock, r.Ops, r.Acked, r.Healed, r.Rejected, r.Failed,
			count(r.LostUpdates), count(r.StaleAccepted), r.Overlaps, r.Seconds)
		if r.Error != "" {
			fmt.Fprintf(tw, "  error: %s", r.Error)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintln(w)
	if len(rep.Violations) == 0 {
		fmt.Fprintln(w, "must hold: "+VerdictOK)
		return
	}
	fmt.Fprintf(w, "must hold: %d %s\n", len(rep.Violations), VerdictViolated)
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  - %s\n", v)
	}
}
