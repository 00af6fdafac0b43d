package report

import (
	"fmt"
	"strings"
)

// writeMatrix writes the scenario × lock matrix: the unfenced kinds, then
// the fenced ones, each in run order, and per lock how often its data
// suffered.
func writeMatrix(p *page, rep *Safety) {
	var unfenced, fenced []LockInfo
	for _, l := range rep.Locks {
		if l.Fenced {
			fenced = append(fenced, l)
		} else {
			unfenced = append(unfenced, l)
		}
	}
	cols := append(append([]LockInfo{}, unfenced...), fenced...)

	fmt.Fprintf(p, `<h2>Matrix</h2>
<div class=key><span class=sw style="background:#fbe0dd"></span>the data suffered (a lost update or a stale write)
<span class=sw style="background:#dff1ea"></span>no lost update, no stale write
<span class=sw style="background:repeating-linear-gradient(135deg,#f1f1f3 0 4px,#e2e3e7 4px 8px)"></span>did not run to the end
<span class=sw style="background:#f7f7f8"></span>not run</div>
<div class="key note">In a cell: <b>lost updates · stale writes accepted</b>, then overlaps, then acked / rejected (/ failed) cycles;
hover a cell for every number and the error, a lock or a scenario for its description.<br>
Dot by a lock's name: %s.</div>
<table class=matrix>
<tr><th class=corner rowspan=2>scenario ↓ &nbsp; lock kind →</th>`, familyKey)
	if len(unfenced) > 0 {
		fmt.Fprintf(p, "<th class=group colspan=%d>unfenced</th>", len(unfenced))
	}
	if len(fenced) > 0 {
		fmt.Fprintf(p, "<th class=\"group fenced\" colspan=%d>fenced: token checked by the verifier</th>", len(fenced))
	}
	p.WriteString("</tr>\n<tr>")
	for _, l := range cols {
		cls := "lock"
		if l.Fenced {
			cls += " fenced"
		}
		tip := l.Name
		if l.Nodes > 0 {
			tip += " · " + Plural(l.Nodes, "node")
		}
		if l.Note != "" {
			tip += " · " + l.Note
		}
		// A long name may break after a "/", a "+" or a "-".
		name := esc(l.Name)
		for _, sep := range []string{"/", "+", "-"} {
			name = strings.ReplaceAll(name, sep, sep+"<wbr>")
		}
		fmt.Fprintf(p, "<th class=\"%s\" title=\"%s\"><span class=dot style=\"color:%s\">●</span>%s</th>",
			cls, esc(tip), familyColor[l.Family], name)
	}
	p.WriteString("</tr>\n")
	for _, s := range rep.Scenarios {
		title := s.Title
		if title == "" {
			title = s.Name
		}
		fmt.Fprintf(p, "<tr><th class=scen title=\"%s\"><b>%s</b> <code class=note>%s</code><div class=\"how note\">%s</div></th>",
			esc(s.Name+": "+s.How), esc(title), esc(s.Name), esc(s.How))
		for _, l := range cols {
			p.WriteString("<td>")
			writeCell(p, s.Name, l.Name, rep.Result(s.Name, l.Name))
			p.WriteString("</td>")
		}
		p.WriteString("</tr>\n")
	}
	// Per lock: in how many of the scenarios it ran in the data suffered.
	p.WriteString("<tr class=sum><th>the data suffered in</th>")
	for _, l := range cols {
		ran, bad := 0, 0
		for _, s := range rep.Scenarios {
			if c := rep.Result(s.Name, l.Name); c != nil {
				ran++
				if c.Bad() {
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
		fmt.Fprintf(p, "<td><span%s>%d</span> of %d</td>", cls, bad, ran)
	}
	p.WriteString("</tr>\n</table>\n")
	p.WriteString("<p class=note>The scenario descriptions are cut short in the matrix; they are in full under <a href=\"#scenarios\">Scenarios</a>, and the lock kinds under <a href=\"#locks\">Lock kinds</a>.</p>\n")
}

// writeCell writes the coloured box of one matrix cell; c is nil when the
// lock was not run in the scenario.
func writeCell(p *page, scenario, lock string, c *SafetyResult) {
	if c == nil {
		fmt.Fprintf(p, "<div class=\"cell missing\" title=\"%s\">not run</div>", esc(scenario+" / "+lock+": not run"))
		return
	}
	cls := "good"
	switch {
	case c.Bad():
		cls = "bad"
	case c.Error != "":
		cls = "err"
	}
	tip := fmt.Sprintf("%s / %s\nops %d, acked %d, rejected %d, failed %d\nlost updates %d, stale accepted %d, overlaps %d\n%.1f s",
		scenario, lock, c.Ops, c.Acked, c.Rejected, c.Failed, c.LostUpdates, c.StaleAccepted, c.Overlaps, c.Seconds)
	if c.Error != "" {
		tip += "\nerror: " + c.Error
	}
	fmt.Fprintf(p, "<div class=\"cell %s\" title=\"%s\">", cls, esc(tip))
	// Each part keeps its words together; a narrow column breaks between
	// the parts.
	fmt.Fprintf(p, "<div class=big><span>%d lost ·</span> <span>%d stale</span></div>", c.LostUpdates, c.StaleAccepted)
	fmt.Fprintf(p, "<div>%s</div>", Plural(c.Overlaps, "overlap"))
	fmt.Fprintf(p, "<div class=small><span>%d acked /</span> <span>%d rejected</span>", c.Acked, c.Rejected)
	if c.Failed > 0 {
		fmt.Fprintf(p, " <span>/ %d failed</span>", c.Failed)
	}
	p.WriteString("</div>")
	if c.Error != "" {
		p.WriteString("<div class=small><b>did not finish</b></div>")
	}
	p.WriteString("</div>")
}
