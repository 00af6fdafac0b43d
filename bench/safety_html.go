package main

import (
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
)

// safetyBad reports whether the protected data suffered in cell c: an
// acknowledged update lost or a stale write accepted.
func safetyBad(c *SafetyResult) bool {
	return c.Anomalies > 0 || c.LostUpdates > 0 || c.StaleAccepted > 0
}

// safetyMatrixCell is the compact terminal form of one cell:
// lost/stale ·overlaps, "!" when the data suffered, "err" when the cell
// did not run to the end, "—" when it was not run.
func safetyMatrixCell(c *SafetyResult) string {
	if c == nil {
		return "—"
	}
	s := fmt.Sprintf("%d/%d ·%d", c.LostUpdates, c.StaleAccepted, c.Overlaps)
	if c.Error != "" {
		s = "err"
	}
	if safetyBad(c) {
		s += "!"
	}
	return s
}

// safetyCount formats an anomaly count, with "!" when it is not zero.
func safetyCount(n int) string {
	if n > 0 {
		return fmt.Sprintf("%d!", n)
	}
	return fmt.Sprint(n)
}

// safetyLockLabel is the lock's name, with "*" when it is fenced.
func safetyLockLabel(l LockInfo) string {
	if l.Fenced {
		return l.Name + "*"
	}
	return l.Name
}

// writeSafetyTable prints the safety report: a scenario × lock matrix,
// the long table of every cell, and the must-hold verdict.
func writeSafetyTable(w io.Writer, rep *SafetyReport) {
	m := rep.Machine
	fmt.Fprintf(w, "%s   (%s, %d CPUs, %s/%s, %s, redis %s", rep.Command, rep.Timestamp, m.CPUs, m.GOOS, m.GOARCH, m.Go, m.Redis)
	if m.Postgres != "" {
		fmt.Fprintf(w, ", postgres %s", m.Postgres)
	}
	if m.Servers != "" {
		fmt.Fprintf(w, ", %s servers", m.Servers)
	}
	fmt.Fprintf(w, ", ttl %s, %d rounds", rep.TTL, rep.Rounds)
	if rep.Extra > 0 {
		fmt.Fprintf(w, " +%d clean ops each", rep.Extra)
	}
	if rep.Elapsed != "" {
		fmt.Fprintf(w, ", took %s", rep.Elapsed)
	}
	fmt.Fprint(w, ")\n\n")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "scenario\t")
	for _, l := range rep.Locks {
		fmt.Fprintf(tw, "%s\t", safetyLockLabel(l))
	}
	fmt.Fprintln(tw)
	for _, s := range rep.Scenarios {
		fmt.Fprintf(tw, "%s\t", s.Name)
		for _, l := range rep.Locks {
			fmt.Fprintf(tw, "%s\t", safetyMatrixCell(rep.result(s.Name, l.Name)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncell: lost updates/stale writes accepted ·overlaps; ! the data suffered (lost or stale > 0);")
	fmt.Fprintln(w, "err: did not run to the end (counts below); —: not run.   * fenced: token checked by the verifier")
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
	fmt.Fprintln(tw, "scenario\tlock\tops\tacked\trejected\tfailed\tlost_updates\tstale_accepted\toverlaps\tseconds\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%.1f\t", r.Scenario, r.Lock, r.Ops, r.Acked, r.Rejected, r.Failed,
			safetyCount(r.LostUpdates), safetyCount(r.StaleAccepted), r.Overlaps, r.Seconds)
		if r.Error != "" {
			fmt.Fprintf(tw, "  error: %s", r.Error)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintln(w)
	if len(rep.Violations) == 0 {
		fmt.Fprintln(w, "must hold: ok")
		return
	}
	fmt.Fprintf(w, "must hold: %d VIOLATED\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  - %s\n", v)
	}
}

// writeSafetyHTML writes the safety report as one self-contained page: the
// scenario × lock matrix coloured by what the data suffered, the must-hold
// verdict, every result, the lock kinds and the versions.
func writeSafetyHTML(path string, rep *SafetyReport) error {
	esc := html.EscapeString
	var b strings.Builder
	b.WriteString(`<!doctype html><html lang=en><head><meta charset=utf-8><title>fencelock safety</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1320px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
p{max-width:960px}
.note{color:#666;font-weight:normal;font-size:12.5px}
code{font-size:12px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:3px 10px;white-space:nowrap;border-bottom:1px solid #e3e3e3;text-align:right} td:first-child,th:first-child{text-align:left}
th{font-weight:600;background:#f6f6f6}
.wrap{text-align:left;white-space:normal}
table.matrix{border-collapse:separate;border-spacing:4px}
.matrix th,.matrix td{border:0;text-align:center;vertical-align:middle}
.matrix th.scen{text-align:left;vertical-align:top;background:none;font-weight:normal;max-width:340px;white-space:normal;padding:6px 8px 6px 0}
.matrix th.scen b{font-weight:600}
.matrix th.lock{border-top:4px solid #8a8f98;min-width:118px}
.matrix th.lock.fenced{border-top-color:#1b7f79;background:#e6f2f1}
.matrix th.group{background:none;font-weight:normal;font-size:12.5px;color:#8a8f98;border-bottom:2px solid #8a8f98;text-align:center}
.matrix th.group.fenced{color:#1b7f79;border-bottom-color:#1b7f79}
.cell{border-radius:4px;padding:6px 8px;min-width:118px}
.cell .big{font-size:15px;font-weight:600}
.cell .small{font-size:11.5px;color:#555}
.cell.good{background:#dff1ea;color:#17623f}
.cell.bad{background:#fbe0dd;color:#b3261e}
.cell.err{background:repeating-linear-gradient(135deg,#f1f1f3 0 6px,#e2e3e7 6px 12px);color:#555}
.cell.missing{background:#f4f4f5;color:#aaa}
.bad-n{color:#b3261e;font-weight:700}
.ok{color:#1b7f79;font-weight:700} .violated{color:#b3261e;font-weight:700}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:5px;vertical-align:0}
.key span{display:inline-block;width:13px;height:13px;border-radius:2px;margin:0 4px 0 12px;vertical-align:-2px}
</style></head><body>
`)
	m := rep.Machine
	fmt.Fprintf(&b, "<h1>fencelock safety</h1><div class=note>%s · %s · %d CPUs %s/%s · %s · redis %s",
		esc(rep.Command), esc(rep.Timestamp), m.CPUs, esc(m.GOOS), esc(m.GOARCH), esc(m.Go), esc(m.Redis))
	if m.Postgres != "" {
		fmt.Fprintf(&b, " · postgres %s", esc(m.Postgres))
	}
	if m.Servers != "" {
		fmt.Fprintf(&b, " · %s servers", esc(m.Servers))
	}
	fmt.Fprintf(&b, " · ttl %s · %d faulted rounds per cell", esc(rep.TTL), rep.Rounds)
	if rep.Extra > 0 {
		fmt.Fprintf(&b, " (+%d clean ops each)", rep.Extra)
	}
	if rep.Elapsed != "" {
		fmt.Fprintf(&b, " · took %s", esc(rep.Elapsed))
	}
	if rep.Quick {
		b.WriteString(" · <b>-quick: few rounds, a smoke run</b>")
	}
	b.WriteString("</div>\n")

	b.WriteString(`<p>Each cell is one lock kind under one failure scenario: workers take the lock and do a read-modify-write of
a PostgreSQL row while the fault is injected, and a checker then counts what the protected data suffered.
<b>Lost updates</b> are acknowledged writes missing from the final data. <b>Stale accepted</b> are committed
writes from an older acquisition than a write committed before them. <b>Overlaps</b> are pairs of cycles whose
holders both believed they held the lock at the same time: under these faults every lock can overlap; fencing is
what keeps an overlap from reaching the data, by having the verifier reject the older token
(<i>rejected</i>). A fenced kind must never lose an update; every scenario must make some unfenced kind lose an update or accept a stale write.</p>
<p class=key><span style="background:#dff1ea"></span>no lost update, no stale write
<span style="background:#fbe0dd"></span>the data suffered
<span style="background:repeating-linear-gradient(135deg,#f1f1f3 0 4px,#e2e3e7 4px 8px)"></span>did not run to the end
<span style="background:#f4f4f5"></span>not run</p>
`)

	// Columns: the unfenced kinds, then the fenced ones, each in run order.
	var unfenced, fenced []LockInfo
	for _, l := range rep.Locks {
		if l.Fenced {
			fenced = append(fenced, l)
		} else {
			unfenced = append(unfenced, l)
		}
	}
	cols := append(append([]LockInfo{}, unfenced...), fenced...)

	b.WriteString("<h2>Matrix</h2><table class=matrix>\n<tr><th class=group style=\"border:0\"></th>")
	if len(unfenced) > 0 {
		fmt.Fprintf(&b, "<th class=group colspan=%d>unfenced</th>", len(unfenced))
	}
	if len(fenced) > 0 {
		fmt.Fprintf(&b, "<th class=\"group fenced\" colspan=%d>fenced: token checked by the verifier</th>", len(fenced))
	}
	b.WriteString("</tr>\n<tr><th class=scen></th>")
	for _, l := range cols {
		cls := "lock"
		if l.Fenced {
			cls += " fenced"
		}
		tip := l.Name
		switch {
		case l.Nodes == 1:
			tip += " · 1 node"
		case l.Nodes > 1:
			tip += fmt.Sprintf(" · %d nodes", l.Nodes)
		}
		if l.Note != "" {
			tip += " · " + l.Note
		}
		fmt.Fprintf(&b, "<th class=\"%s\" title=\"%s\"><span class=dot style=\"background:%s\"></span>%s</th>",
			cls, esc(tip), safetyOriginColor(l.Name), esc(l.Name))
	}
	b.WriteString("</tr>\n")
	for _, s := range rep.Scenarios {
		title := s.Title
		if title == "" {
			title = s.Name
		}
		fmt.Fprintf(&b, "<tr><th class=scen><b>%s</b> <code class=note>%s</code><br><span class=note>%s</span></th>",
			esc(title), esc(s.Name), esc(s.How))
		for _, l := range cols {
			b.WriteString("<td>")
			writeSafetyCell(&b, s.Name, l.Name, rep.result(s.Name, l.Name))
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString(`</table>
<p class=note>In a cell: lost updates · stale writes accepted, then overlaps, then acked / rejected (/ failed) cycles.
Hover for every number and the error. The dot by a lock's name: <span class=dot style="background:#1b7f79"></span>fencelock
<span class=dot style="background:#8a8f98"></span>floor (no lock library) <span class=dot style="background:#d9822b"></span>peer.</p>
`)

	b.WriteString("<h2>Must hold</h2>")
	if len(rep.Violations) == 0 {
		b.WriteString("<p><span class=ok>ok</span>: no fenced kind lost an update or accepted a stale write, and every scenario provoked an unfenced kind.</p>\n")
	} else {
		fmt.Fprintf(&b, "<p><span class=violated>%d violated</span></p><ul>\n", len(rep.Violations))
		for _, v := range rep.Violations {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(v))
		}
		b.WriteString("</ul>\n")
	}

	b.WriteString("<h2>All results</h2><table><tr><th>scenario</th><th>lock</th><th>fenced</th><th>ops</th><th>acked</th><th>rejected</th><th>failed</th><th>lost updates</th><th>stale accepted</th><th>overlaps</th><th>seconds</th><th>error</th></tr>\n")
	for _, r := range rep.Results {
		num := func(n int) string {
			if n > 0 {
				return fmt.Sprintf("<span class=bad-n>%d</span>", n)
			}
			return fmt.Sprint(n)
		}
		f := ""
		if rep.fenced(r.Lock) {
			f = "yes"
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%.1f</td><td class=\"wrap note\">%s</td></tr>\n",
			esc(r.Scenario), esc(r.Lock), f, r.Ops, r.Acked, r.Rejected, r.Failed, num(r.LostUpdates), num(r.StaleAccepted),
			r.Overlaps, r.Seconds, esc(r.Error))
	}
	b.WriteString("</table>\n")

	b.WriteString("<h2>Lock kinds</h2><table><tr><th>lock</th><th>fenced</th><th>nodes</th><th>note</th></tr>\n")
	for _, l := range rep.Locks {
		f := ""
		if l.Fenced {
			f = "yes"
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%d</td><td class=wrap>%s</td></tr>\n", esc(l.Name), f, l.Nodes, esc(l.Note))
	}
	b.WriteString("</table>\n<h2>Scenarios</h2><table><tr><th>scenario</th><th>title</th><th>how</th></tr>\n")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(&b, "<tr><td>%s</td><td class=wrap>%s</td><td class=wrap>%s</td></tr>\n", esc(s.Name), esc(s.Title), esc(s.How))
	}
	b.WriteString("</table>\n<h2>Versions</h2><table>")
	for _, k := range sortedKeys(rep.Versions) {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>", esc(k), esc(rep.Versions[k]))
	}
	b.WriteString("</table></body></html>\n")
	return writeFile(path, []byte(b.String()))
}

// safetyOriginColor is the perf report's colour of where lock kind name
// comes from: fencelock, the floor (hand-rolled) or a peer library.
func safetyOriginColor(name string) string {
	switch {
	case strings.HasPrefix(name, "naive"):
		return "#8a8f98"
	case strings.HasPrefix(name, "lease"), strings.HasPrefix(name, "redlock"):
		return "#1b7f79"
	}
	return "#d9822b"
}

// writeSafetyCell writes the coloured box of one matrix cell; c is nil when
// the lock was not run in the scenario.
func writeSafetyCell(b *strings.Builder, scenario, lock string, c *SafetyResult) {
	esc := html.EscapeString
	if c == nil {
		fmt.Fprintf(b, "<div class=\"cell missing\" title=\"%s\">—</div>", esc(scenario+" / "+lock+": not run"))
		return
	}
	cls := "good"
	switch {
	case safetyBad(c):
		cls = "bad"
	case c.Error != "":
		cls = "err"
	}
	tip := fmt.Sprintf("%s / %s\nops %d, acked %d, rejected %d, failed %d\nlost updates %d, stale accepted %d, overlaps %d\n%.1f s",
		scenario, lock, c.Ops, c.Acked, c.Rejected, c.Failed, c.LostUpdates, c.StaleAccepted, c.Overlaps, c.Seconds)
	if c.Error != "" {
		tip += "\nerror: " + c.Error
	}
	fmt.Fprintf(b, "<div class=\"cell %s\" title=\"%s\">", cls, esc(tip))
	fmt.Fprintf(b, "<div class=big>%d lost · %d stale</div>", c.LostUpdates, c.StaleAccepted)
	fmt.Fprintf(b, "<div>%d overlaps</div>", c.Overlaps)
	fmt.Fprintf(b, "<div class=small>%d acked / %d rejected", c.Acked, c.Rejected)
	if c.Failed > 0 {
		fmt.Fprintf(b, " / %d failed", c.Failed)
	}
	b.WriteString("</div>")
	if c.Error != "" {
		b.WriteString("<div class=small><b>did not finish</b></div>")
	}
	b.WriteString("</div>")
}
