package report

import (
	"fmt"
	"strings"

	"github.com/fencelock/fencelock/bench/internal/locks"
)

const perfCSS = `td:first-child,th:first-child{text-align:left}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(660px,1fr));gap:18px 28px}
figure{margin:0} figcaption{margin-bottom:4px}
svg text{font:12px system-ui,sans-serif} svg .tick{fill:#888;font-size:10.5px} svg .val{fill:#333}
.met{color:#1b7f79;font-weight:600} .missed{color:#b3261e;font-weight:700} .na{color:#888}
.dot{font-size:11px;margin-right:4px;vertical-align:1px}
`

// family is the family of a perf row's lock; the database rows, labelled
// with their scenario, count as fencelock (guarded) or floor (unguarded).
func family(label string) locks.Family {
	switch {
	case strings.Contains(label, "_unguarded"):
		return locks.Floor
	case strings.Contains(label, "_guarded"):
		return locks.Fencelock
	}
	return locks.FamilyOf(label)
}

// chartOf collects one figure of every lock in scenario.
func chartOf(rep *Perf, scenario string, f func(*Result) *float64, text func(*Result) string) []bar {
	var bars []bar
	for _, r := range rep.Results {
		if r.Scenario != scenario || r.Skipped {
			continue
		}
		if v := f(&r); v != nil {
			label := r.Lock
			if IsWriteShape(r) {
				label = r.Lock + " " + r.Scenario
			}
			bars = append(bars, bar{label: label, value: *v, text: text(&r), color: familyColor[family(label)]})
		}
	}
	return bars
}

// WritePerfHTML writes the perf report as one self-contained page: the
// targets, a bar chart per scenario, every result, the locks' setup and
// the versions.
func WritePerfHTML(path string, rep *Perf) error {
	p := newPage("fencelock perf", perfCSS, &rep.Header)
	fmt.Fprintf(p, "<p class=key>%s</p>", familyKey)

	p.WriteString("<h2>Targets</h2><table><tr><th>target</th><th>verdict</th><th>measured</th></tr>\n")
	for _, t := range rep.Targets {
		cls := map[string]string{"met": "met", "MISSED": "missed", "n/a": "na"}[t.Verdict()]
		fmt.Fprintf(p, "<tr><td>%s</td><td class=%s>%s</td><td>%s</td></tr>\n", esc(t.Name), cls, t.Verdict(), esc(t.Measured))
	}
	p.WriteString("</table>\n<h2>Charts</h2><div class=grid>\n")
	writePerfCharts(p, rep)
	p.WriteString("</div>\n")
	writePerfResults(p, rep)
	return p.close(path, rep.Versions)
}

func writePerfCharts(p *page, rep *Perf) {
	latText := func(r *Result) string { return fmtDur(*r.P50us) + " (p99 " + fmtDur(*r.P99us) + ")" }
	opsText := func(r *Result) string { return fmt.Sprintf("%.0f/s", *r.OpsPerSec) }
	p.WriteString(barChart("uncontended acquire+release, p50", "sequential, distinct keys · shorter is better", chartOf(rep, "uncontended", p50, latText), false))
	p.WriteString(barChart("parallel acquire+release throughput", "64 goroutines, distinct keys · longer is better", chartOf(rep, "parallel", ops, opsText), false))
	p.WriteString(barChart("wake: release → blocked waiter acquires, p50", "log scale · shorter is better · raw, naive and setnx-getset have no waiting acquire", chartOf(rep, "wake", p50, latText), true))
	shareText := func(r *Result) string {
		return fmt.Sprintf("%.0f/s  share %s–%s", *r.OpsPerSec, fmtShare(r.MinShare), fmtShare(r.MaxShare))
	}
	p.WriteString(barChart("hotkey: critical sections per second", "8 workers, one key, 1 ms held · longer is better · shares: fair is 0.125",
		chartOf(rep, "hotkey", ops, shareText), false))
	p.WriteString(barChart("hotkey64: critical sections per second", "64 workers, one key, 1 ms held · longer is better · shares: fair is 0.016",
		chartOf(rep, "hotkey64", ops, shareText), false))
	if ws := waiterResults(rep); len(ws) > 0 {
		what := fmt.Sprintf("%d waiters on %s", ws[0].Workers, Plural(ws[0].Keys, "key"))
		p.WriteString(barChart("waiters: connections of the lock's client while they wait",
			what+" · bar: all its connections, text: of which in pub/sub · shorter is better",
			chartOf(rep, "waiters", func(r *Result) *float64 { return intFloat(r.Conns) }, func(r *Result) string {
				return fmt.Sprintf("%s, %d pub/sub", Plural(*r.Conns, "conn"), deref(r.PubSubConns))
			}), false))
		p.WriteString(barChart("waiters: bench CPU while they wait", what+" · CPU seconds per second · shorter is better",
			chartOf(rep, "waiters", func(r *Result) *float64 { return r.CPUPerSec }, func(r *Result) string {
				return fmtCPU(r.CPUPerSec) + " CPU-s/s"
			}), false))
		p.WriteString(barChart("waiters: release → every waiter has had the lock", what+" · from the holders' release · shorter is better",
			chartOf(rep, "waiters", func(r *Result) *float64 { return r.AllAcquiredMs }, func(r *Result) string {
				return fmtDur(*r.AllAcquiredMs * 1e3)
			}), false))
	}
	var pg []bar
	for _, s := range []string{"pg_unguarded", "pg_guarded", "pg_guarded_withtx"} {
		pg = append(pg, chartOf(rep, s, p50, latText)...)
	}
	if len(pg) > 0 {
		p.WriteString(barChart("postgres: UPDATE in a transaction, p50", "with and without the pgverifier guard · shorter is better", pg, false))
	}
	var sq []bar
	for _, s := range []string{"sql_unguarded", "sql_guarded", "sql_guarded_withtx"} {
		sq = append(sq, chartOf(rep, s, p50, latText)...)
	}
	if len(sq) > 0 {
		p.WriteString(barChart("database/sql: UPDATE in a transaction, p50", "MariaDB and PostgreSQL, with and without the sqlverifier guard · shorter is better", sq, false))
	}
}

func writePerfResults(p *page, rep *Perf) {
	p.WriteString("<h2>All results</h2><div class=scroll><table><tr><th>lock</th><th>scenario</th><th>p50 µs</th><th>p99 µs</th><th>ops/s</th><th>samples</th><th>min share</th><th>max share</th>" +
		"<th>conns</th><th>pub/sub</th><th>CPU s/s</th><th>all acquired ms</th><th>errors</th><th>note</th></tr>\n")
	for _, r := range rep.Results {
		fmt.Fprintf(p, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td>"+
			"<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td title=\"%s\">%s</td><td class=\"wrap note\">%s</td></tr>\n",
			esc(r.Lock), esc(r.Scenario), fmtUs(r.P50us), fmtUs(r.P99us), fmtOps(r.OpsPerSec), r.Samples, fmtShare(r.MinShare), fmtShare(r.MaxShare),
			fmtInt(r.Conns), fmtInt(r.PubSubConns), fmtCPU(r.CPUPerSec), fmtMs(r.AllAcquiredMs),
			esc(r.FirstErr), esc(errorsOf([]Result{r}, func(*Result) bool { return true })), esc(r.Note))
	}
	p.WriteString("</table></div>\n")
	if len(rep.Locks) > 0 {
		p.WriteString("<h2>Locks</h2><table>")
		seen := map[string]bool{}
		for _, n := range append(lockRows(rep.Results), sortedKeys(rep.Locks)...) {
			if note, ok := rep.Locks[n]; ok && !seen[n] {
				seen[n] = true
				fmt.Fprintf(p, "<tr><td>%s</td><td class=wrap>%s</td></tr>\n", esc(n), esc(note))
			}
		}
		p.WriteString("</table>\n")
	}
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
