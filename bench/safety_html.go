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
// must-hold verdict, the scenario × lock matrix coloured by what the data
// suffered, every result, the lock kinds, the scenarios and the versions.
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
td,th{padding:3px 10px;white-space:nowrap;border-bottom:1px solid #e3e3e3;text-align:right;vertical-align:top}
th{font-weight:600;background:#f6f6f6}
td.l,th.l{text-align:left}
.wrap{text-align:left;white-space:normal}
table.matrix{border-collapse:separate;border-spacing:4px;margin-left:-4px}
.matrix th,.matrix td{border:0;padding:0;text-align:center;vertical-align:middle}
.matrix th.corner{text-align:left;vertical-align:bottom;background:none;font-size:12.5px;color:#666;font-weight:normal;padding:0 8px 4px 0}
.matrix th.scen{text-align:left;background:none;font-weight:normal;width:300px;min-width:300px;max-width:300px;white-space:normal;padding:4px 10px 4px 0}
.matrix th.scen b{font-weight:600}
.matrix .how{display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:2;line-clamp:2;overflow:hidden;line-height:1.35}
.matrix th.lock{border-top:4px solid #8a8f98;padding:5px 6px;white-space:normal;min-width:112px;line-height:1.25}
.matrix th.lock.fenced{border-top-color:#1b7f79;background:#e6f2f1}
.matrix th.group{background:none;font-weight:normal;font-size:12.5px;color:#6b7079;border-bottom:2px solid #8a8f98;padding:2px 6px}
.matrix th.group.fenced{color:#1b7f79;border-bottom-color:#1b7f79;font-weight:600}
.matrix tr.sum th,.matrix tr.sum td{font-size:12.5px;color:#555;padding:4px 0;border-top:1px solid #d5d5d8}
.matrix tr.sum th{text-align:right;padding-right:10px;background:none;font-weight:normal}
.cell{border-radius:4px;padding:6px 8px;line-height:1.35}
.cell .big{font-size:15px;font-weight:600}
.cell .small{font-size:11.5px;color:#555}
.cell.good{background:#dff1ea;color:#17623f}
.cell.bad{background:#fbe0dd;color:#b3261e}
.cell.err{background:repeating-linear-gradient(135deg,#f1f1f3 0 6px,#e2e3e7 6px 12px);color:#555}
.cell.missing{background:#f7f7f8;color:#9a9aa2;font-size:12px;padding:8px}
.bad-n{color:#b3261e;font-weight:700}
.ok{color:#1b7f79;font-weight:700} .violated{color:#b3261e;font-weight:700}
.verdict{border-left:4px solid #1b7f79;background:#eef6f5;padding:8px 12px;max-width:936px}
.verdict.bad{border-left-color:#b3261e;background:#fdf0ee}
.verdict ul{margin:4px 0 0;padding-left:20px}
.dot{font-size:11px;margin-right:4px;vertical-align:1px}
.key{margin:6px 0}
.key .sw{display:inline-block;width:14px;height:14px;border-radius:3px;margin:0 5px 0 14px;vertical-align:-3px;border:1px solid rgba(0,0,0,.18)}
.key .sw:first-child{margin-left:0}
.key .dot{margin-left:10px}
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

	fmt.Fprintf(&b, `<p>Each cell is one lock kind under one failure scenario. In each of the %d faulted rounds of a cell, a fault
makes two holders, A and B, both believe they hold the lock while each does a read-modify-write of a PostgreSQL row;
a checker then counts what the protected data suffered.
<b>Lost updates</b> are acknowledged writes missing from the final data. <b>Stale accepted</b> are committed
writes from an older acquisition than a write committed before them. <b>Overlaps</b> are pairs of cycles whose
holders both believed they held the lock at the same time: under these faults every lock can overlap; fencing is
what keeps an overlap from reaching the data, by having the verifier reject the older token
(<i>rejected</i>). A fenced kind must never lose an update; every scenario must make some unfenced kind lose an update or accept a stale write.</p>
`, rep.Rounds)

	if len(rep.Violations) == 0 {
		b.WriteString("<div class=verdict><b>Must hold:</b> <span class=ok>ok</span>: no fenced kind lost an update or accepted a stale write, and every scenario provoked an unfenced kind.</div>\n")
	} else {
		fmt.Fprintf(&b, "<div class=\"verdict bad\"><b>Must hold:</b> <span class=violated>%d violated</span><ul>\n", len(rep.Violations))
		for _, v := range rep.Violations {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(v))
		}
		b.WriteString("</ul></div>\n")
	}

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

	b.WriteString(`<h2>Matrix</h2>
<div class=key><span class=sw style="background:#fbe0dd"></span>the data suffered (a lost update or a stale write)
<span class=sw style="background:#dff1ea"></span>no lost update, no stale write
<span class=sw style="background:repeating-linear-gradient(135deg,#f1f1f3 0 4px,#e2e3e7 4px 8px)"></span>did not run to the end
<span class=sw style="background:#f7f7f8"></span>not run</div>
<div class="key note">In a cell: <b>lost updates · stale writes accepted</b>, then overlaps, then acked / rejected (/ failed) cycles;
hover a cell for every number and the error, a lock or a scenario for its description.<br>
Dot by a lock's name: <span class=dot style="color:#1b7f79">●</span>fencelock
<span class=dot style="color:#8a8f98">●</span>floor (no lock library) <span class=dot style="color:#d9822b">●</span>peer library.</div>
<table class=matrix>
<tr><th class=corner rowspan=2>scenario ↓ &nbsp; lock kind →</th>`)
	if len(unfenced) > 0 {
		fmt.Fprintf(&b, "<th class=group colspan=%d>unfenced</th>", len(unfenced))
	}
	if len(fenced) > 0 {
		fmt.Fprintf(&b, "<th class=\"group fenced\" colspan=%d>fenced: token checked by the verifier</th>", len(fenced))
	}
	b.WriteString("</tr>\n<tr>")
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
		// A long name may break after a "/".
		name := strings.ReplaceAll(esc(l.Name), "/", "/<wbr>")
		fmt.Fprintf(&b, "<th class=\"%s\" title=\"%s\"><span class=dot style=\"color:%s\">●</span>%s</th>",
			cls, esc(tip), safetyOriginColor(l.Name), name)
	}
	b.WriteString("</tr>\n")
	for _, s := range rep.Scenarios {
		title := s.Title
		if title == "" {
			title = s.Name
		}
		fmt.Fprintf(&b, "<tr><th class=scen title=\"%s\"><b>%s</b> <code class=note>%s</code><div class=\"how note\">%s</div></th>",
			esc(s.Name+": "+s.How), esc(title), esc(s.Name), esc(s.How))
		for _, l := range cols {
			b.WriteString("<td>")
			writeSafetyCell(&b, s.Name, l.Name, rep.result(s.Name, l.Name))
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	// Per lock: in how many of the scenarios it ran in the data suffered.
	b.WriteString("<tr class=sum><th>the data suffered in</th>")
	for _, l := range cols {
		ran, bad := 0, 0
		for _, s := range rep.Scenarios {
			if c := rep.result(s.Name, l.Name); c != nil {
				ran++
				if safetyBad(c) {
					bad++
				}
			}
		}
		cls := ""
		switch {
		case bad > 0:
			cls = " class=bad-n"
		case ran > 0:
			cls = " class=ok"
		}
		fmt.Fprintf(&b, "<td><span%s>%d</span> of %d</td>", cls, bad, ran)
	}
	b.WriteString("</tr>\n</table>\n")
	b.WriteString("<p class=note>The scenario descriptions are cut short in the matrix; they are in full under <a href=\"#scenarios\">Scenarios</a>, and the lock kinds under <a href=\"#locks\">Lock kinds</a>.</p>\n")

	hasErr := false
	for _, r := range rep.Results {
		hasErr = hasErr || r.Error != ""
	}
	b.WriteString("<h2>All results</h2><table><tr><th class=l>scenario</th><th class=l>lock</th><th class=l>fenced</th><th>ops</th><th>acked</th><th>rejected</th><th>failed</th><th>lost updates</th><th>stale accepted</th><th>overlaps</th><th>seconds</th>")
	if hasErr {
		b.WriteString("<th class=l>error</th>")
	}
	b.WriteString("</tr>\n")
	num := func(n int) string {
		if n > 0 {
			return fmt.Sprintf("<span class=bad-n>%d</span>", n)
		}
		return fmt.Sprint(n)
	}
	for _, r := range rep.Results {
		f := ""
		if rep.fenced(r.Lock) {
			f = "yes"
		}
		fmt.Fprintf(&b, "<tr><td class=l>%s</td><td class=l>%s</td><td class=l>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%.1f</td>",
			esc(r.Scenario), esc(r.Lock), f, r.Ops, r.Acked, r.Rejected, r.Failed, num(r.LostUpdates), num(r.StaleAccepted),
			r.Overlaps, r.Seconds)
		if hasErr {
			fmt.Fprintf(&b, "<td class=\"wrap note\">%s</td>", esc(r.Error))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")

	b.WriteString("<h2 id=locks>Lock kinds</h2><table><tr><th class=l>lock</th><th class=l>fenced</th><th>nodes</th><th class=l>note</th></tr>\n")
	for _, l := range rep.Locks {
		f := ""
		if l.Fenced {
			f = "yes"
		}
		fmt.Fprintf(&b, "<tr><td class=l>%s</td><td class=l>%s</td><td>%d</td><td class=wrap>%s</td></tr>\n", esc(l.Name), f, l.Nodes, esc(l.Note))
	}
	b.WriteString("</table>\n<h2 id=scenarios>Scenarios</h2><table><tr><th class=l>scenario</th><th class=l>title</th><th class=l>how</th></tr>\n")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(&b, "<tr><td class=l>%s</td><td class=wrap style=\"min-width:160px\">%s</td><td class=wrap>%s</td></tr>\n", esc(s.Name), esc(s.Title), esc(s.How))
	}
	b.WriteString("</table>\n<h2>Versions</h2><table>")
	for _, k := range sortedKeys(rep.Versions) {
		fmt.Fprintf(&b, "<tr><td class=l>%s</td><td class=l>%s</td></tr>", esc(k), esc(rep.Versions[k]))
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
		fmt.Fprintf(b, "<div class=\"cell missing\" title=\"%s\">not run</div>", esc(scenario+" / "+lock+": not run"))
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
