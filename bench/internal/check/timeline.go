package check

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Timeline geometry, in SVG user units (1 unit = 1 px at full width). The
// SVG scales down to its container and is laid out for 1200 px pages.
const (
	tlWidth  = 1160.0
	tlLeft   = 56.0 // lane labels
	tlRight  = 12.0
	tlTop    = 22.0 // time axis
	tlFaultH = 18.0 // the fault lane
	tlLaneH  = 14.0
	tlGap    = 4.0
	tlBarH   = 10.0
)

var outcomeColor = map[Outcome]string{Ok: "#3f8f2f", Fail: "#9a9a9a", Unknown: "#8e44ad"}

const rejectedColor = "#e39b1b"

var faultColor = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#bcbd22", "#8c564b", "#e377c2"}

func colorOfFault(f Fault) string {
	if i := slices.Index(AllFaults, f); i >= 0 {
		return faultColor[i%len(faultColor)]
	}
	return "#7f7f7f"
}

const timelineCSS = `body{font:14px/1.4 system-ui,sans-serif;margin:16px;max-width:1180px;color:#222}
h1{font-size:20px}h2{font-size:17px;margin-top:28px}
svg{width:100%;height:auto;display:block;border:1px solid #ddd}
svg text{font:11px system-ui,sans-serif;fill:#333}
.op:hover,.fault:hover{stroke:#000;stroke-width:1}
.anomaly rect{stroke:#d00;stroke-width:2}
.lease rect{fill:#555;fill-opacity:.55}.lease-anomaly rect{fill:#d00}.leave line{stroke:#d00;stroke-width:2}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
td.n{text-align:right}.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
.bad{color:#c00;font-weight:600}summary{cursor:pointer;margin-top:6px}`

// WriteTimeline writes a self-contained HTML page (inline SVG and CSS, no
// scripts or external assets) with one timeline per run: a lane per client,
// operations as bars colored by outcome, fault windows shaded across the
// lanes, and the operations of each anomaly outlined and marked in red;
// below each timeline, the anomalies and the fault windows as tables.
// Hovering a bar shows the operation.
func WriteTimeline(w io.Writer, title string, runs []Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n<style>%s</style></head><body>\n",
		esc(title), timelineCSS)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	b.WriteString(legend())
	for i := range runs {
		writeRunTimeline(&b, &runs[i])
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func legend() string {
	item := func(color, label string, extra string) string {
		return fmt.Sprintf(`<span><i class="sw" style="background:%s%s"></i>%s</span>`, color, extra, esc(label))
	}
	var b strings.Builder
	b.WriteString(`<p class="legend">`)
	b.WriteString(item(outcomeColor[Ok], "ok", ""))
	b.WriteString(item(rejectedColor, "rejected (stale token)", ""))
	b.WriteString(item(outcomeColor[Fail], "failed", ""))
	b.WriteString(item(outcomeColor[Unknown], "unknown", ""))
	b.WriteString(item("#fff", "anomaly: outlined, ▼ marks it", ";border:2px solid #d00"))
	b.WriteString(item("#555", "lease window (the line under a lane; red: two holders at once)", ";height:3px"))
	b.WriteString(`<span>reads are drawn pale; shaded columns are fault windows</span></p>` + "\n")
	return b.String()
}

func writeRunTimeline(b *strings.Builder, run *Run) {
	s := &run.Summary
	h := &run.History
	fmt.Fprintf(b, "<h2>%s%s</h2>\n", esc(s.Kind), map[bool]string{true: " (fenced)"}[s.Fenced])
	total := s.TotalAnomalies()
	fmt.Fprintf(b, "<p>seed %d · %s · %d %s · %d ops: %d acked, %d rejected, %d failed, %d unknown · <span class=\"%s\">%d %s</span></p>\n",
		s.Seed, s.Duration.Round(time.Millisecond), s.Clients, plural(s.Clients, "client", "clients"),
		s.Ops, s.Acked, s.Rejected, s.Failed, s.Unknown,
		map[bool]string{true: "bad"}[total > 0], total, plural(total, "anomaly", "anomalies"))

	span := h.Span()
	for _, win := range run.Schedule {
		span = max(span, win.End())
	}
	for i := range h.Leases {
		span = max(span, h.Leases[i].End())
	}
	if span <= 0 {
		span = time.Second
	}
	var clients []int
	hasOps := map[int]bool{}
	addLane := func(c int) {
		if !slices.Contains(clients, c) {
			clients = append(clients, c)
		}
	}
	for i := range h.Ops {
		addLane(h.Ops[i].Client)
		hasOps[h.Ops[i].Client] = true
	}
	for i := range h.Leases {
		addLane(h.Leases[i].Client)
	}
	for i := range h.Leaves {
		addLane(h.Leaves[i].Client)
	}
	slices.Sort(clients)
	lane := map[int]int{}
	for i, c := range clients {
		lane[c] = i
	}
	plotW := tlWidth - tlLeft - tlRight
	x := func(t time.Duration) float64 { return tlLeft + plotW*float64(t)/float64(span) }
	laneY := func(i int) float64 { return tlTop + tlFaultH + tlGap + float64(i)*(tlLaneH+tlGap) }
	height := laneY(len(clients)) + 6

	fmt.Fprintf(b, `<svg viewBox="0 0 %.0f %.0f" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="timeline of %s">`+"\n",
		tlWidth, height, esc(s.Kind))
	writeAxis(b, span, x, height)

	// fault windows: a shaded column over every lane and a labelled bar
	for _, win := range run.Schedule {
		x0, x1 := x(win.Start), x(win.End())
		wd := math.Max(1, x1-x0)
		c := colorOfFault(win.Fault)
		tip := fmt.Sprintf("%s: %s – %s", win.Fault, fmtDur(win.Start), fmtDur(win.End()))
		if win.Detail != "" {
			tip += "\n" + win.Detail
		}
		fmt.Fprintf(b, `<g class="fault" data-fault="%s"><title>%s</title>`, esc(string(win.Fault)), esc(tip))
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.12"/>`,
			x0, tlTop, wd, height-tlTop, c)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.7"/>`,
			x0, tlTop+2, wd, tlFaultH-4, c)
		if label := fitLabel(string(win.Fault), wd); label != "" {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" style="fill:#fff">%s</text>`, x0+3, tlTop+13, esc(label))
		}
		b.WriteString("</g>\n")
	}
	fmt.Fprintf(b, `<text x="4" y="%.1f">faults</text>`+"\n", tlTop+13)
	for i, c := range clients {
		name := "client"
		if !hasOps[c] {
			name = "waiter" // a waiter process of a nemesis
		}
		fmt.Fprintf(b, `<text x="4" y="%.1f">%s %d</text>`+"\n", laneY(i)+tlBarH, name, c)
	}

	// operations, anomalous ones last so their outline is on top
	bad := map[int][]string{}
	for _, a := range run.Anomalies() {
		for _, id := range a.Ops {
			bad[id] = append(bad[id], a.Checker+": "+a.Detail)
		}
	}
	drawOp := func(op *Op) {
		x0, x1 := x(op.Start), x(op.End)
		color := outcomeColor[op.Outcome]
		if op.Rejected {
			color = rejectedColor
		}
		opacity := "1"
		if op.Kind == KindRead {
			opacity = "0.45"
		}
		y := laneY(lane[op.Client])
		tip := op.String()
		if op.Error != "" {
			tip += ": " + op.Error
		}
		notes := bad[op.ID]
		class := "op"
		if len(notes) > 0 {
			class = "anomaly"
			tip += "\n" + strings.Join(notes, "\n")
		}
		fmt.Fprintf(b, `<g class="%s" data-op="%d"><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s" fill-opacity="%s"/>`,
			class, op.ID, esc(tip), x0, y, math.Max(1, x1-x0), tlBarH, color, opacity)
		if len(notes) > 0 {
			fmt.Fprintf(b, `<path d="M%.1f %.1fl-4 -5h8z" fill="#d00"/>`, x0, y)
		}
		b.WriteString("</g>\n")
	}
	for i := range h.Ops {
		if len(bad[h.Ops[i].ID]) == 0 {
			drawOp(&h.Ops[i])
		}
	}
	for i := range h.Ops {
		if len(bad[h.Ops[i].ID]) > 0 {
			drawOp(&h.Ops[i])
		}
	}
	// lease windows: a thin line under each lane's bars
	badLease := map[int][]string{}
	for _, a := range run.Anomalies() {
		for _, id := range a.Leases {
			badLease[id] = append(badLease[id], a.Checker+": "+a.Detail)
		}
	}
	for i := range h.Leases {
		l := &h.Leases[i]
		end := l.End()
		if end == 0 {
			end = span // never released, no deadline
		}
		if end <= l.Start {
			continue
		}
		y := laneY(lane[l.Client]) + tlBarH + 1
		tip := l.String()
		if l.Note != "" {
			tip += "\n" + l.Note
		}
		class := "lease"
		if notes := badLease[l.ID]; len(notes) > 0 {
			class = "lease-anomaly"
			tip += "\n" + strings.Join(notes, "\n")
		}
		fmt.Fprintf(b, `<g class="%s" data-lease="%d"><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="2.5"/>`,
			class, l.ID, esc(tip), x(l.Start), y, math.Max(1, x(end)-x(l.Start)))
		if class == "lease-anomaly" {
			fmt.Fprintf(b, `<path d="M%.1f %.1fl-4 -5h8z" fill="#d00"/>`, x(l.Start), y-tlBarH-1)
		}
		b.WriteString("</g>\n")
	}
	// waiters that left the queue: a red tick where the process was gone
	for i := range h.Leaves {
		l := &h.Leaves[i]
		y := laneY(lane[l.Client])
		tip := fmt.Sprintf("waiter %d left %s (%s): queued %s, told to leave %s, gone %s", l.Client, l.Lock, l.How,
			fmtDur(l.Queued), fmtDur(l.Left), fmtDur(l.Gone))
		if l.Note != "" {
			tip += "\n" + l.Note
		}
		fmt.Fprintf(b, `<g class="leave"><title>%s</title><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`+"\n",
			esc(tip), x(l.Gone), y, x(l.Gone), y+tlLaneH)
	}
	b.WriteString("</svg>\n")
	writeAnomalyTable(b, run)
	writeFaultTable(b, run.Schedule)
}

func writeAxis(b *strings.Builder, span time.Duration, x func(time.Duration) float64, height float64) {
	step := niceStep(span, 10)
	for t := time.Duration(0); t <= span; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, x(t), tlTop, x(t), height)
		fmt.Fprintf(b, `<text x="%.1f" y="14" text-anchor="middle">%s</text>`+"\n", x(t), fmtDur(t))
	}
}

// niceStep is the 1-2-5 step giving at most n ticks over span.
func niceStep(span time.Duration, n int) time.Duration {
	for step := time.Millisecond; ; step *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if span/(step*m) < time.Duration(n) {
				return step * m
			}
		}
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(time.Millisecond).String()
}

// fitLabel shortens label to what fits width (about 6.2 units a character).
func fitLabel(label string, width float64) string {
	n := int((width - 6) / 6.2)
	switch {
	case n >= len(label):
		return label
	case n < 4:
		return ""
	}
	return label[:n-1] + "…"
}

// maxRows bounds the anomaly table; the JSON has them all.
const maxRows = 200

func writeAnomalyTable(b *strings.Builder, run *Run) {
	as := run.Anomalies()
	if len(as) == 0 {
		b.WriteString("<p>No anomalies.</p>\n")
		return
	}
	fmt.Fprintf(b, "<details open><summary>%d %s</summary>\n", len(as), plural(len(as), "anomaly", "anomalies"))
	b.WriteString("<table><tr><th>checker</th><th>kind</th><th>resource</th><th>ops</th><th>detail</th></tr>\n")
	for i, a := range as {
		if i == maxRows {
			fmt.Fprintf(b, "<tr><td colspan=\"5\">… %d more in the JSON report</td></tr>\n", len(as)-maxRows)
			break
		}
		fmt.Fprintf(b, `<tr class="anomaly-row"><td>%s</td><td class="bad">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`+"\n",
			esc(a.Checker), esc(a.Kind), esc(a.Resource), esc(describeAnomalyIDs(a)), esc(a.Detail))
	}
	b.WriteString("</table></details>\n")
}

// describeAnomalyIDs lists an anomaly's leases, then its operations.
func describeAnomalyIDs(a Anomaly) string {
	if len(a.Leases) == 0 {
		return describeIDs(a.Ops)
	}
	s := "leases " + describeIDs(a.Leases)
	if len(a.Ops) > 0 {
		s += "; ops " + describeIDs(a.Ops)
	}
	return s
}

func writeFaultTable(b *strings.Builder, ws []Window) {
	if len(ws) == 0 {
		b.WriteString("<p>No faults injected.</p>\n")
		return
	}
	fmt.Fprintf(b, "<details><summary>%d fault %s</summary>\n", len(ws), plural(len(ws), "window", "windows"))
	b.WriteString("<table><tr><th>fault</th><th>start</th><th>end</th><th>detail</th></tr>\n")
	for _, w := range ws {
		fmt.Fprintf(b, `<tr><td><i class="sw" style="background:%s"></i>%s</td><td class="n">%s</td><td class="n">%s</td><td>%s</td></tr>`+"\n",
			colorOfFault(w.Fault), esc(string(w.Fault)), fmtDur(w.Start), fmtDur(w.End()), esc(w.Detail))
	}
	b.WriteString("</table></details>\n")
}

func esc(s string) string { return html.EscapeString(s) }
