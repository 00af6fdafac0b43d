package report

import (
	"fmt"
)

const safetyCSS = `.matrix{border-collapse:separate;border-spacing:4px;margin-left:-4px}
.matrix th,.matrix td{border:0;padding:0;text-align:center;vertical-align:middle}
.matrix td{white-space:normal}
.matrix th.corner{text-align:left;vertical-align:bottom;background:none;font-size:12.5px;color:#666;font-weight:normal;padding:0 8px 4px 0}
.matrix th.scen{text-align:left;background:none;font-weight:normal;width:210px;min-width:210px;max-width:210px;white-space:normal;padding:4px 8px 4px 0}
.matrix th.scen b{font-weight:600}
.matrix .how{display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:2;line-clamp:2;overflow:hidden;line-height:1.35}
.matrix th.lock{border-top:4px solid #8a8f98;padding:5px 4px;white-space:normal;overflow-wrap:anywhere;min-width:80px;line-height:1.25}
.matrix th.lock.fenced{border-top-color:#1b7f79;background:#e6f2f1}
.matrix th.group{background:none;font-weight:normal;font-size:12.5px;color:#6b7079;border-bottom:2px solid #8a8f98;padding:2px 6px}
.matrix th.group.fenced{color:#1b7f79;border-bottom-color:#1b7f79;font-weight:600}
.matrix tr.sum th,.matrix tr.sum td{font-size:12.5px;color:#555;padding:4px 0;border-top:1px solid #d5d5d8}
.matrix tr.sum th{text-align:right;padding-right:10px;background:none;font-weight:normal}
.cell{border-radius:4px;padding:5px 6px;line-height:1.35}
.cell .big{font-size:14px;font-weight:600}
.cell .small{font-size:11.5px;color:#555}
.cell span{white-space:nowrap}
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
.key .sw{display:inline-block;width:14px;height:14px;border-radius:3px;margin:0 5px 0 14px;vertical-align:-3px;border:1px solid rgba(0,0,0,.18)}
.key .sw:first-child{margin-left:0}
.key .dot{margin-left:10px}
`

// WriteSafetyHTML writes the safety report as one self-contained page: the
// must-hold verdict, the scenario × lock matrix coloured by what the data
// suffered, every result, the lock kinds, the scenarios and the versions.
func WriteSafetyHTML(path string, rep *Safety) error {
	p := newPage("fencelock safety", safetyCSS, &rep.Header, rep.facts(true)...)
	fmt.Fprintf(p, `<p>Each cell is one lock kind under one failure scenario. In each of the %s of a cell, a fault
makes two holders, A and B, both believe they hold the lock while each does a read-modify-write of a PostgreSQL row;
a checker then counts what the protected data suffered.
<b>Lost updates</b> are acknowledged writes missing from the final data. <b>Stale accepted</b> are committed
writes from an older acquisition than a write committed before them. <b>Overlaps</b> are pairs of cycles whose
holders both believed they held the lock at the same time: under these faults every lock can overlap; fencing is
what keeps an overlap from reaching the data, by having the verifier reject the older token
(<i>rejected</i>). A fenced kind must never lose an update; every scenario must make some unfenced kind lose an update or accept a stale write.</p>
`, Plural(rep.Rounds, "faulted round"))

	if len(rep.Violations) == 0 {
		p.WriteString("<div class=verdict><b>Must hold:</b> <span class=ok>" + VerdictOK + "</span>: no fenced kind lost an update or accepted a stale write, and every scenario provoked an unfenced kind.</div>\n")
	} else {
		fmt.Fprintf(p, "<div class=\"verdict bad\"><b>Must hold:</b> <span class=violated>%d %s</span><ul>\n", len(rep.Violations), VerdictViolated)
		for _, v := range rep.Violations {
			fmt.Fprintf(p, "<li>%s</li>\n", esc(v))
		}
		p.WriteString("</ul></div>\n")
	}
	writeMatrix(p, rep)
	writeSafetyResults(p, rep)

	p.WriteString("<h2 id=locks>Lock kinds</h2><table><tr><th class=l>lock</th><th class=l>fenced</th><th>nodes</th><th class=l>note</th></tr>\n")
	for _, l := range rep.Locks {
		fmt.Fprintf(p, "<tr><td class=l>%s</td><td class=l>%s</td><td>%d</td><td class=wrap>%s</td></tr>\n", esc(l.Name), yes(l.Fenced), l.Nodes, esc(l.Note))
	}
	p.WriteString("</table>\n<h2 id=scenarios>Scenarios</h2><table><tr><th class=l>scenario</th><th class=l>title</th><th class=l>how</th></tr>\n")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(p, "<tr><td class=l>%s</td><td class=wrap style=\"min-width:160px\">%s</td><td class=wrap>%s</td></tr>\n", esc(s.Name), esc(s.Title), esc(s.How))
	}
	p.WriteString("</table>\n")
	return p.close(path, rep.Versions)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// writeSafetyResults writes the long table: every cell's numbers.
func writeSafetyResults(p *page, rep *Safety) {
	hasErr := false
	for _, r := range rep.Results {
		hasErr = hasErr || r.Error != ""
	}
	p.WriteString("<h2>All results</h2><table><tr><th class=l>scenario</th><th class=l>lock</th><th class=l>fenced</th><th>ops</th><th>acked</th><th>healed</th><th>rejected</th><th>failed</th><th>lost updates</th><th>stale accepted</th><th>overlaps</th><th>seconds</th>")
	if hasErr {
		p.WriteString("<th class=l>error</th>")
	}
	p.WriteString("</tr>\n")
	num := func(n int) string {
		if n > 0 {
			return fmt.Sprintf("<span class=bad-n>%d</span>", n)
		}
		return fmt.Sprint(n)
	}
	for _, r := range rep.Results {
		fmt.Fprintf(p, "<tr><td class=l>%s</td><td class=l>%s</td><td class=l>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%.1f</td>",
			esc(r.Scenario), esc(r.Lock), yes(rep.Fenced(r.Lock)), r.Ops, r.Acked, r.Healed, r.Rejected, r.Failed, num(r.LostUpdates), num(r.StaleAccepted),
			r.Overlaps, r.Seconds)
		if hasErr {
			fmt.Fprintf(p, "<td class=\"wrap note\">%s</td>", esc(r.Error))
		}
		p.WriteString("</tr>\n")
	}
	p.WriteString("</table>\n")
}
