package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// bar is one bar of a chart.
type bar struct {
	label string
	value float64
	text  string // printed after the bar
	kind  string // fencelock, floor or peer: the colour
}

func lockKind(lock string) string {
	switch {
	case lock == "raw" || lock == "naive" || lock == "pg_unguarded":
		return "floor"
	case lock == "lease" || strings.HasPrefix(lock, "redlock") || lock == "pg_guarded" || lock == "pg_guarded_withtx":
		return "fencelock"
	}
	return "peer"
}

var kindColor = map[string]string{"fencelock": "#1b7f79", "floor": "#8a8f98", "peer": "#d9822b"}

// barChart draws horizontal bars as inline SVG. With logScale the axis is
// logarithmic, for figures that span orders of magnitude.
func barChart(title, note string, bars []bar, logScale bool) string {
	const width, labelW, textW, rowH, top = 660, 96, 200, 26, 8
	plotW := float64(width - labelW - textW)
	var b strings.Builder
	fmt.Fprintf(&b, "<figure><figcaption><b>%s</b> <span class=note>%s</span></figcaption>\n", html.EscapeString(title), html.EscapeString(note))
	if len(bars) == 0 {
		b.WriteString("<p class=note>no data</p></figure>\n")
		return b.String()
	}
	hi, lo := 0.0, math.Inf(1)
	for _, br := range bars {
		hi = max(hi, br.value)
		if br.value > 0 {
			lo = min(lo, br.value)
		}
	}
	if hi <= 0 {
		hi = 1
	}
	x := func(v float64) float64 { return plotW * v / hi }
	var ticks []float64
	if logScale {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if hi <= lo {
			hi = lo * 10
		}
		x = func(v float64) float64 {
			if v <= lo {
				return 2
			}
			return plotW * math.Log10(v/lo) / math.Log10(hi/lo)
		}
		for t := lo; t <= hi*1.001; t *= 10 {
			ticks = append(ticks, t)
		}
	}
	h := top + rowH*len(bars) + 22
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`+"\n",
		width, h, width, h, html.EscapeString(title))
	for _, t := range ticks {
		tx := labelW + x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" class=tick text-anchor="middle">%s</text>`+"\n",
			tx, top, tx, h-18, tx, h-5, tickLabel(t))
	}
	for i, br := range bars {
		y := top + i*rowH
		w := max(x(br.value), 1)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" class=label>%s</text>`, labelW-8, y+17, html.EscapeString(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/>`, labelW, y+4, w, rowH-8, kindColor[br.kind])
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class=val>%s</text>`+"\n", float64(labelW)+w+6, y+17, html.EscapeString(br.text))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>`, labelW, top, labelW, h-18)
	b.WriteString("</svg></figure>\n")
	return b.String()
}

func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gs", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gms", v/1e3)
	}
	return fmt.Sprintf("%gµs", v)
}

// fmtDur formats microseconds for people: µs, ms or s.
func fmtDur(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f ms", v/1e3)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// chartOf collects one figure of every lock in scenario.
func chartOf(rep *Report, scenario string, f func(*Result) *float64, text func(*Result) string) []bar {
	var bars []bar
	for _, r := range rep.Results {
		if r.Scenario != scenario || r.Skipped {
			continue
		}
		if v := f(&r); v != nil {
			label := r.Lock
			if r.Lock == "postgres" {
				label = r.Scenario
			}
			bars = append(bars, bar{label: label, value: *v, text: text(&r), kind: lockKind(label)})
		}
	}
	return bars
}

// waiterResults returns the waiters rows that ran.
func waiterResults(rep *Report) []Result {
	var ws []Result
	for _, r := range rep.Results {
		if r.Scenario == "waiters" && !r.Skipped {
			ws = append(ws, r)
		}
	}
	return ws
}

func fptr(p *int) *float64 {
	if p == nil {
		return nil
	}
	return ptr(float64(*p))
}

func writeHTML(path string, rep *Report) error {
	var b strings.Builder
	b.WriteString(`<!doctype html><html lang=en><head><meta charset=utf-8><title>fencelock perf</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1320px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.note{color:#666;font-weight:normal;font-size:12.5px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(660px,1fr));gap:18px 28px}
figure{margin:0} figcaption{margin-bottom:4px}
svg text{font:12px system-ui,sans-serif} svg .tick{fill:#888;font-size:10.5px} svg .val{fill:#333}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:3px 10px;white-space:nowrap;border-bottom:1px solid #e3e3e3;text-align:right} td:first-child,th:first-child{text-align:left}
th{font-weight:600;background:#f6f6f6}
.met{color:#1b7f79;font-weight:600} .missed{color:#b3261e;font-weight:700} .na{color:#888}
.key span{display:inline-block;width:11px;height:11px;border-radius:2px;margin:0 4px 0 12px;vertical-align:-1px}
</style></head><body>
`)
	m := rep.Machine
	fmt.Fprintf(&b, "<h1>fencelock perf</h1><div class=note>%s · %s · %d CPUs %s/%s · %s · redis %s",
		html.EscapeString(rep.Command), rep.Timestamp, m.CPUs, m.GOOS, m.GOARCH, m.Go, html.EscapeString(m.Redis))
	if m.Postgres != "" {
		fmt.Fprintf(&b, " · postgres %s", html.EscapeString(m.Postgres))
	}
	fmt.Fprintf(&b, " · %s servers · took %s", html.EscapeString(m.Servers), rep.Elapsed)
	if rep.Quick {
		b.WriteString(" · <b>-quick: small samples, a smoke run</b>")
	}
	b.WriteString(`</div><p class=key><span style="background:#1b7f79"></span>fencelock<span style="background:#8a8f98"></span>floor (no lock library)<span style="background:#d9822b"></span>peers</p>`)

	b.WriteString("<h2>Targets</h2><table><tr><th>target</th><th>verdict</th><th>measured</th></tr>\n")
	for _, t := range rep.Targets {
		cls := map[string]string{"met": "met", "MISSED": "missed", "n/a": "na"}[t.verdict()]
		fmt.Fprintf(&b, "<tr><td>%s</td><td class=%s>%s</td><td>%s</td></tr>\n", html.EscapeString(t.Name), cls, t.verdict(), html.EscapeString(t.Measured))
	}
	b.WriteString("</table>\n<h2>Charts</h2><div class=grid>\n")

	p50 := func(r *Result) *float64 { return r.P50us }
	ops := func(r *Result) *float64 { return r.OpsPerSec }
	latText := func(r *Result) string { return fmtDur(*r.P50us) + " (p99 " + fmtDur(*r.P99us) + ")" }
	opsText := func(r *Result) string { return fmt.Sprintf("%.0f/s", *r.OpsPerSec) }
	b.WriteString(barChart("uncontended acquire+release, p50", "sequential, distinct keys · shorter is better", chartOf(rep, "uncontended", p50, latText), false))
	b.WriteString(barChart("parallel acquire+release throughput", "64 goroutines, distinct keys · longer is better", chartOf(rep, "parallel", ops, opsText), false))
	b.WriteString(barChart("wake: release → blocked waiter acquires, p50", "log scale · shorter is better · raw/naive have no waiting acquire", chartOf(rep, "wake", p50, latText), true))
	shareText := func(r *Result) string {
		return fmt.Sprintf("%.0f/s  share %s–%s", *r.OpsPerSec, fmtShare(r.MinShare), fmtShare(r.MaxShare))
	}
	b.WriteString(barChart("hotkey: critical sections per second", "8 workers, one key, 1 ms held · longer is better · shares: fair is 0.125",
		chartOf(rep, "hotkey", ops, shareText), false))
	b.WriteString(barChart("hotkey64: critical sections per second", "64 workers, one key, 1 ms held · longer is better · shares: fair is 0.016",
		chartOf(rep, "hotkey64", ops, shareText), false))
	if ws := waiterResults(rep); len(ws) > 0 {
		w := ws[0]
		what := fmt.Sprintf("%d waiters on %d keys", w.Workers, w.Keys)
		b.WriteString(barChart("waiters: connections of the lock's client while they wait",
			what+" · bar: all its connections, text: of which in pub/sub · shorter is better",
			chartOf(rep, "waiters", func(r *Result) *float64 { return fptr(r.Conns) }, func(r *Result) string {
				return fmt.Sprintf("%d conns, %d pub/sub", *r.Conns, deref(r.PubSubConns))
			}), false))
		b.WriteString(barChart("waiters: bench CPU while they wait", what+" · CPU seconds per second · shorter is better",
			chartOf(rep, "waiters", func(r *Result) *float64 { return r.CPUPerSec }, func(r *Result) string {
				return fmtCPU(r.CPUPerSec) + " CPU-s/s"
			}), false))
		b.WriteString(barChart("waiters: release → every waiter has had the lock", what+" · from the holders' release · shorter is better",
			chartOf(rep, "waiters", func(r *Result) *float64 { return r.AllAcquiredMs }, func(r *Result) string {
				return fmtDur(*r.AllAcquiredMs * 1e3)
			}), false))
	}
	pg := append(chartOf(rep, "pg_unguarded", p50, latText), chartOf(rep, "pg_guarded", p50, latText)...)
	pg = append(pg, chartOf(rep, "pg_guarded_withtx", p50, latText)...)
	if len(pg) > 0 {
		b.WriteString(barChart("postgres: UPDATE in a transaction, p50", "with and without the pgverifier guard · shorter is better", pg, false))
	}
	b.WriteString("</div>\n<h2>All results</h2><table><tr><th>lock</th><th>scenario</th><th>p50 µs</th><th>p99 µs</th><th>ops/s</th><th>samples</th><th>min share</th><th>max share</th>" +
		"<th>conns</th><th>pub/sub</th><th>CPU s/s</th><th>all acquired ms</th><th>errors</th><th>note</th></tr>\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td>"+
			"<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td style=\"text-align:left;white-space:normal\" class=note>%s</td></tr>\n",
			html.EscapeString(r.Lock), r.Scenario, fmtUs(r.P50us), fmtUs(r.P99us), fmtOps(r.OpsPerSec), r.Samples, fmtShare(r.MinShare), fmtShare(r.MaxShare),
			fmtInt(r.Conns), fmtInt(r.PubSubConns), fmtCPU(r.CPUPerSec), fmtMs(r.AllAcquiredMs), r.Errors, html.EscapeString(r.Note))
	}
	b.WriteString("</table>\n")
	if len(rep.Locks) > 0 {
		b.WriteString("<h2>Locks</h2><table>")
		for _, n := range lockNames {
			if note, ok := rep.Locks[n]; ok {
				fmt.Fprintf(&b, "<tr><td>%s</td><td style=\"text-align:left;white-space:normal\">%s</td></tr>\n", html.EscapeString(n), html.EscapeString(note))
			}
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("<h2>Versions</h2><table>")
	for _, k := range sortedKeys(rep.Versions) {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>", html.EscapeString(k), html.EscapeString(rep.Versions[k]))
	}
	b.WriteString("</table></body></html>\n")
	return writeFile(path, []byte(b.String()))
}
