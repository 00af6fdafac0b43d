package report

import (
	"fmt"
	"strings"

	"github.com/fencelock/fencelock/bench/internal/locks"
)

// perfCSS fits the page in 1200 px: one chart a row below 1360 px, tables
// at most the page's width, their text cells (errors, notes, setups)
// wrapping.
const perfCSS = `td:first-child,th:first-child{text-align:left}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(660px,1fr));gap:18px 28px}
figure{margin:0} figcaption{margin-bottom:4px;max-width:660px}
svg{max-width:100%;height:auto}
svg text{font:12px system-ui,sans-serif} svg .tick{fill:#888;font-size:10.5px} svg .val{fill:#333}
table{max-width:100%;margin:8px 0}
th{white-space:normal}
td.t,th.t{text-align:left}
td.wrap{min-width:160px;max-width:520px;overflow-wrap:anywhere}
.met{color:#1b7f79;font-weight:600} .missed{color:#b3261e;font-weight:700} .na{color:#888}
.dot{font-size:11px;margin-right:4px;vertical-align:1px}
.warn{background:#fff4e5;border-left:4px solid #d9822b;padding:6px 10px;max-width:960px}
`

// family is the family of a perf row's lock; the database rows, labelled
// with their scenario, count as fencelock (guarded) or floor (unguarded),
// and the sleep ceiling as floor.
func family(label string) locks.Family {
	switch {
	case strings.Contains(label, "_unguarded"), strings.HasPrefix(label, sleepLabel):
		return locks.Floor
	case strings.Contains(label, "_guarded"), strings.Contains(label, "_perrow"):
		return locks.Fencelock
	}
	return locks.FamilyOf(label)
}

// sleepLabel labels the sleep ceiling's bar.
const sleepLabel = "time.Sleep ceiling"

// barsOf collects one figure of every result of rs.
func barsOf(rs []*Result, f func(*Result) *float64, text func(*Result) string) []bar {
	var bars []bar
	for _, r := range rs {
		if v := f(r); v != nil {
			label := r.Lock
			if IsWriteShape(*r) {
				label = r.Lock + " " + r.Scenario
			}
			bars = append(bars, bar{label: label, value: *v, text: text(r), color: familyColor[family(label)]})
		}
	}
	return bars
}

// WritePerfHTML writes the perf report as one self-contained page: a
// section per question (its chart and its table), then the targets, every
// result, the locks' setup and the versions.
func WritePerfHTML(path string, rep *Perf) error {
	p := newPage("fencelock perf", perfCSS, &rep.Header)
	if rep.Quick {
		fmt.Fprintf(p, "<p class=warn><b>%s</b></p>\n", esc(quickWarning))
	}
	fmt.Fprintf(p, "<p class=key>%s</p>", familyKey)
	if roundsOfAll(rep) {
		fmt.Fprintf(p, "<p>%s</p>\n", esc(howTaken))
		if n := noise(rep); len(n) > 0 {
			fmt.Fprintf(p, "<p><b>Noise of this run:</b> %s.</p>\n", esc(strings.Join(n, "; ")))
		}
	}
	charts := perfCharts(rep)
	for _, q := range questions(rep) {
		fmt.Fprintf(p, "<h2 id=%s>%s</h2><p class=note>%s</p>\n", q.id, esc(q.title), esc(q.caption))
		for _, c := range charts[q.id] {
			p.WriteString(c)
		}
		writeHTMLTable(p, q)
		for _, n := range q.notes {
			fmt.Fprintf(p, "<p class=note>%s</p>\n", esc(n))
		}
	}
	if len(rep.Targets) > 0 {
		p.WriteString("<h2>Targets</h2><p class=note>the issue's, on this run; ratios are medians of paired rounds where the locks took turns</p>\n")
		p.WriteString("<table><tr><th class=t>target</th><th class=t>verdict</th><th class=t>measured</th></tr>\n")
		for _, t := range rep.Targets {
			cls := map[string]string{VerdictMet: "met", VerdictMissed: "missed", VerdictNA: "na"}[t.Verdict()]
			fmt.Fprintf(p, "<tr><td class=wrap>%s</td><td class=\"t %s\">%s</td><td class=wrap>%s</td></tr>\n", esc(t.Name), cls, t.Verdict(), esc(t.Measured))
		}
		p.WriteString("</table>\n")
	}
	writePerfResults(p, rep)
	return p.close(path, rep.Versions)
}

// writeHTMLTable writes q's table; its text columns and its errors column
// wrap, the errors with the whole first error on hover.
func writeHTMLTable(p *page, q question) {
	p.WriteString("<table><tr>")
	for i, h := range q.head {
		cls := ""
		if i < q.left || i == q.wrapCol {
			cls = " class=t"
		}
		fmt.Fprintf(p, "<th%s>%s</th>", cls, esc(h))
	}
	p.WriteString("</tr>\n")
	for _, row := range q.rows {
		p.WriteString("<tr>")
		for i, c := range row {
			switch {
			case i == q.wrapCol:
				fmt.Fprintf(p, "<td class=wrap>%s</td>", esc(c))
			case i < q.left:
				fmt.Fprintf(p, "<td class=t>%s</td>", esc(c))
			default:
				fmt.Fprintf(p, "<td>%s</td>", esc(c))
			}
		}
		p.WriteString("</tr>\n")
	}
	p.WriteString("</table>\n")
}

// perfCharts draws the charts of each question, by its id.
func perfCharts(rep *Perf) map[string][]string {
	out := map[string][]string{}
	latText := func(r *Result) string { return fmtDur(*r.P50us) + " (p99 " + fmtDur(*r.P99us) + ")" }
	opsText := func(r *Result) string { return fmt.Sprintf("%.0f/s", *r.OpsPerSec) }
	out["uncontended"] = []string{barChart("uncontended acquire+release, p50", "sequential, distinct keys · shorter is better",
		barsOf(scenarioResults(rep, "uncontended"), p50, latText), false)}
	out["parallel"] = []string{barChart("parallel acquire+release throughput", "distinct keys · longer is better",
		barsOf(scenarioResults(rep, "parallel"), ops, opsText), false)}
	wakeText := func(r *Result) string { return WakeText(r.P50us) + " (p99 " + WakeText(r.P99us) + ")" }
	out["wake"] = []string{barChart("wake: release → blocked waiter acquires, p50", "log scale · shorter is better",
		barsOf(scenarioResults(rep, "wake"), p50, wakeText), true)}
	shareText := func(r *Result) string {
		if r.Lock == sleepLabel {
			return fmt.Sprintf("%.0f/s  (no lock can pass it)", *r.OpsPerSec)
		}
		return fmt.Sprintf("%.0f/s  share %s–%s", *r.OpsPerSec, fmtShare(r.MinShare), fmtShare(r.MaxShare))
	}
	for _, s := range []string{"hotkey", "hotkey64"} {
		rs := scenarioResults(rep, s)
		if len(rs) == 0 {
			continue
		}
		if c := ceilingOf(rep, s); c != nil {
			cc := *c
			cc.Lock = sleepLabel
			rs = append(rs, &cc)
		}
		held := ""
		if h, _, ok := holdOf(rs...); ok {
			held = ", " + h + " held"
		}
		out[s] = []string{barChart(s+": critical sections per second", fmt.Sprintf("%d workers, one key%s · longer is better", rs[0].Workers, held),
			barsOf(rs, ops, shareText), false)}
	}
	if ws := waiterResults(rep); len(ws) > 0 {
		var rs []*Result
		for i := range ws {
			rs = append(rs, &ws[i])
		}
		what := fmt.Sprintf("%d waiters on %s", ws[0].Workers, Plural(ws[0].Keys, "key"))
		out["waiters"] = []string{
			barChart("waiters: connections of the lock's client while they wait", what+" · text: of which in pub/sub · shorter is better",
				barsOf(rs, func(r *Result) *float64 { return intFloat(r.Conns) }, func(r *Result) string {
					return fmt.Sprintf("%s, %d pub/sub", Plural(*r.Conns, "conn"), deref(r.PubSubConns))
				}), false),
			barChart("waiters: bench CPU while they wait", what+" · CPU seconds per second · shorter is better",
				barsOf(rs, func(r *Result) *float64 { return r.CPUPerSec }, func(r *Result) string { return fmtCPU(r.CPUPerSec) + " CPU-s/s" }), false),
			barChart("waiters: release → every waiter has had the lock", what+" · shorter is better",
				barsOf(rs, func(r *Result) *float64 { return r.AllAcquiredMs }, func(r *Result) string { return fmtDur(*r.AllAcquiredMs * 1e3) }), false),
		}
	}
	for _, g := range []struct{ prefix, title string }{
		{"pg_", "postgres (pgverifier): UPDATE in a transaction, p50"},
		{"sql_", "database/sql (sqlverifier): UPDATE in a transaction, p50"},
	} {
		var rs []*Result
		for i := range rep.Results {
			if r := &rep.Results[i]; IsWriteShape(*r) && strings.HasPrefix(r.Scenario, g.prefix) {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			out["database"] = append(out["database"], barChart(g.title, "with and without the guard · shorter is better", barsOf(rs, p50, latText), false))
		}
	}
	return out
}

// writePerfResults writes every result, its figures, errors and note, and
// the locks' setup; text cells wrap.
func writePerfResults(p *page, rep *Perf) {
	p.WriteString("<h2>All results</h2><table><tr><th class=t>lock</th><th class=t>scenario</th><th>p50 µs</th><th>p99 µs</th><th>ops/s</th><th>samples</th>" +
		"<th class=t>errors</th><th class=t>note</th></tr>\n")
	for _, r := range append(append([]Result{}, rep.Results...), rep.Ceilings...) {
		if r.Skipped {
			continue
		}
		fmt.Fprintf(p, "<tr><td class=t>%s</td><td class=t>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td>"+
			"<td class=wrap title=\"%s\">%s</td><td class=\"wrap note\">%s</td></tr>\n",
			esc(r.Lock), esc(r.Scenario), usCell(&r, r.P50us), usCell(&r, r.P99us), fmtOps(r.OpsPerSec), r.Samples,
			esc(r.FirstErr), esc(resultErrors(&r)), esc(r.Note))
	}
	p.WriteString("</table><p class=note>raw, naive and setnx-getset have no waiting acquire: no wake, hotkey or waiters rows.</p>\n")
	if len(rep.Locks) > 0 {
		p.WriteString("<h2>Locks</h2><table>")
		seen := map[string]bool{}
		for _, n := range append(lockRows(rep.Results), sortedKeys(rep.Locks)...) {
			if note, ok := rep.Locks[n]; ok && !seen[n] {
				seen[n] = true
				fmt.Fprintf(p, "<tr><td class=t>%s</td><td class=wrap>%s</td></tr>\n", esc(n), esc(note))
			}
		}
		p.WriteString("</table>\n")
	}
}

// usCell is a figure in µs for a table cell; a wake of 0 is said in words.
func usCell(r *Result, p *float64) string {
	if r.Scenario == "wake" && p != nil && *p <= 0 {
		return WakeText(p)
	}
	return fmtUs(p)
}

func intFloat(p *int) *float64 {
	if p == nil {
		return nil
	}
	return Ptr(float64(*p))
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
