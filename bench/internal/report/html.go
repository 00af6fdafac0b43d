package report

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/fencelock/fencelock/bench/internal/locks"
)

var esc = html.EscapeString

// baseCSS is the style every page shares; each page adds its own.
const baseCSS = `body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1320px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
p{max-width:960px}
.note{color:#666;font-weight:normal;font-size:12.5px}
code{font-size:12px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:3px 10px;white-space:nowrap;border-bottom:1px solid #e3e3e3;text-align:right;vertical-align:top}
th{font-weight:600;background:#f6f6f6}
td.l,th.l{text-align:left}
.wrap{text-align:left;white-space:normal}
.scroll{overflow-x:auto;max-width:100%}
.key{margin:6px 0}
`

// familyColor is the colour of each lock family, in charts and dots.
var familyColor = map[locks.Family]string{locks.Fencelock: "#1b7f79", locks.Floor: "#8a8f98", locks.Peer: "#d9822b"}

// familyKey is the legend of familyColor.
const familyKey = `<span class=dot style="color:#1b7f79">●</span>fencelock
<span class=dot style="color:#8a8f98">●</span>floor (no lock library) <span class=dot style="color:#d9822b">●</span>peer library`

// page is one self-contained HTML report being written.
type page struct{ strings.Builder }

// newPage opens a page called title with baseCSS and css, and its header:
// the command and the facts of h, with extra facts before "took".
func newPage(title, css string, h *Header, extra ...string) *page {
	p := &page{}
	fmt.Fprintf(p, "<!doctype html><html lang=en><head><meta charset=utf-8><title>%s</title>\n<style>\n%s%s</style></head><body>\n",
		esc(title), baseCSS, css)
	fmt.Fprintf(p, "<h1>%s</h1><div class=note>%s", esc(title), esc(h.Command))
	for _, f := range h.facts(extra...) {
		fmt.Fprintf(p, " · %s", esc(f))
	}
	if h.Quick {
		p.WriteString(" · <b>-quick: a smoke run, not figures to quote</b>")
	}
	p.WriteString("</div>\n")
	for _, n := range h.Notes {
		fmt.Fprintf(p, "<p class=warn>%s</p>\n", esc(n))
	}
	return p
}

// close writes the versions table, ends the page and writes it to path.
func (p *page) close(path string, versions map[string]string) error {
	p.WriteString("<h2>Versions</h2><table>")
	for _, k := range sortedKeys(versions) {
		fmt.Fprintf(p, "<tr><td class=l>%s</td><td class=l>%s</td></tr>", esc(k), esc(versions[k]))
	}
	p.WriteString("</table></body></html>\n")
	return writeFile(path, []byte(p.String()))
}

// bar is one bar of a chart.
type bar struct {
	label string
	value float64
	text  string // printed after the bar
	color string
}

// barChart draws horizontal bars as inline SVG. With logScale the axis is
// logarithmic, for figures that span orders of magnitude. The label column
// is as wide as the longest label needs, the room after the longest bar as
// its text needs.
func barChart(title, note string, bars []bar, logScale bool) string {
	const width, rowH, top = 660, 26, 8
	var b strings.Builder
	fmt.Fprintf(&b, "<figure><figcaption><b>%s</b> <span class=note>%s</span></figcaption>\n", esc(title), esc(note))
	if len(bars) == 0 {
		b.WriteString("<p class=note>no data</p></figure>\n")
		return b.String()
	}
	longest, longText := 0, 0
	for _, br := range bars {
		longest = max(longest, len([]rune(br.label)))
		longText = max(longText, len([]rune(br.text)))
	}
	labelW := max(96, 7*longest+16) // 12px system-ui: under 7px a character
	textW := max(200, 7*longText+12)
	plotW := float64(width - labelW - textW)
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
		width, h, width, h, esc(title))
	for _, t := range ticks {
		tx := float64(labelW) + x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" class=tick text-anchor="middle">%s</text>`+"\n",
			tx, top, tx, h-18, tx, h-5, tickLabel(t))
	}
	for i, br := range bars {
		y := top + i*rowH
		w := max(x(br.value), 1)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" class=label>%s</text>`, labelW-8, y+17, esc(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/>`, labelW, y+4, w, rowH-8, br.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class=val>%s</text>`+"\n", float64(labelW)+w+6, y+17, esc(br.text))
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

// fmtDur formats microseconds for people: whole µs, or ms or s.
func fmtDur(v float64) string { return durText(v, 0) }

// durText formats microseconds for people: µs with usDecimals decimals, or
// ms or s.
func durText(v float64, usDecimals int) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f ms", v/1e3)
	}
	return fmt.Sprintf("%.*f µs", usDecimals, v)
}
