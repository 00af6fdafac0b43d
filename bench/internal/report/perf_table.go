package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

func fmtF(format string) func(*float64) string {
	return func(p *float64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprintf(format, *p)
	}
}

var (
	fmtOps   = fmtF("%.0f")
	fmtCPU   = fmtF("%.3f") // CPU seconds per second
	fmtMs    = fmtF("%.1f")
	fmtShare = fmtF("%.3f")
)

func fmtInt(p *int) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprint(*p)
}

// The figures of a Result, for Field.
var (
	p50 = func(r *Result) *float64 { return r.P50us }
	ops = func(r *Result) *float64 { return r.OpsPerSec }
)

// quickWarning heads a -quick report.
const quickWarning = "-quick: small samples on a smoke run. These figures are noisy: do not quote them."

// howTaken says how the interleaved figures were taken.
const howTaken = "The locks take turns: in each round every lock runs a short slice (raw, naive, ..., " +
	"lease, ..., the peers), each round starting one lock further on, so a noisy neighbour weighs on all " +
	"of them alike, and ×raw and ×best peer are medians of the ratios of one round (the database writes " +
	"take turns the same way, for ×unguarded). \"over the rounds\": the spread of a lock's figure from " +
	"round to round, min–max and the interquartile range as a share of the median."

// WritePerfTable prints the report for someone choosing a lock: the
// header, a table per question (uncontended, parallel, fairness, wake,
// 1,000 waiters, the database guard), then the targets; every line at most
// TextWidth columns.
func WritePerfTable(w io.Writer, rep *Perf) {
	for _, l := range wrap(rep.Command, TextWidth, "    ") {
		fmt.Fprintln(w, l)
	}
	for _, l := range wrap(strings.Join(rep.facts(), ", "), TextWidth-2, "") {
		fmt.Fprintln(w, "  "+l)
	}
	for _, n := range rep.Notes {
		writeWrapped(w, n, "  ")
	}
	if rep.Quick {
		fmt.Fprintf(w, "\n%s\n", quickWarning)
	}
	qs := questions(rep)
	if len(rep.Results) > 0 && roundsOfAll(rep) {
		fmt.Fprintln(w)
		writeWrapped(w, howTaken, "")
		if n := noise(rep); len(n) > 0 {
			writeWrapped(w, "Noise of this run: "+strings.Join(n, "; ")+".", "")
		}
	}
	for _, q := range qs {
		fmt.Fprintln(w)
		writeQuestion(w, q)
	}
	fmt.Fprintln(w)
	writeWrapped(w, "raw, naive and setnx-getset have no waiting acquire: they have no wake, hotkey or waiters rows. "+
		"errors: the count, and the cause of the first error (the JSON has the whole first error).", "")
	if len(rep.Targets) > 0 {
		fmt.Fprintln(w, "\nTargets (the issue's, on this run; ratios are medians of paired rounds where the locks took turns):")
		writeTargets(w, rep.Targets)
	}
	if rep.Quick {
		fmt.Fprintf(w, "\n%s\n", quickWarning)
	}
}

// roundsOfAll reports whether any result ran interleaved.
func roundsOfAll(rep *Perf) bool {
	for _, r := range rep.Results {
		if len(r.PerRound) > 0 {
			return true
		}
	}
	return false
}

// writeQuestion prints q: its title and caption, the table (split into
// several when it is wider than TextWidth: the first column repeated),
// then its notes.
func writeQuestion(w io.Writer, q question) {
	fmt.Fprintln(w, q.title)
	for _, l := range wrap(q.caption, TextWidth-2, "") {
		fmt.Fprintln(w, "  "+l)
	}
	for _, part := range splitColumns(q, TextWidth) {
		writeGrid(w, part.head, part.rows, part.left)
	}
	for _, n := range q.notes {
		writeWrapped(w, n, "  ")
	}
}

// writeGrid prints a table: the first left columns and the last
// (errors, notes) left-aligned, the figures right-aligned, two spaces
// apart, no trailing spaces.
func writeGrid(w io.Writer, head []string, rows [][]string, left int) {
	all := append([][]string{head}, rows...)
	widths := make([]int, len(head))
	for _, row := range all {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range all {
		var b strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < left || i == len(row)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// splitColumns returns q as one or more tables no wider than width: when
// the whole is wider, the columns after the first are dealt into parts,
// each repeating the first column.
func splitColumns(q question, width int) []question {
	widths := make([]int, len(q.head))
	for _, row := range append([][]string{q.head}, q.rows...) {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	total := 0
	for _, x := range widths {
		total += x + 2
	}
	if total <= width {
		return []question{q}
	}
	var parts []question
	for start := 1; start < len(q.head); {
		used, end := widths[0]+2, start
		for end < len(q.head) && (end == start || used+widths[end]+2 <= width) {
			used += widths[end] + 2
			end++
		}
		cols := append([]int{0}, seq(start, end)...)
		p := question{head: pick(q.head, cols), left: 1}
		if start == 1 {
			p.left = q.left
		}
		for _, r := range q.rows {
			p.rows = append(p.rows, pick(r, cols))
		}
		parts = append(parts, p)
		start = end
	}
	return parts
}

func seq(a, b int) []int {
	var out []int
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

func pick(row []string, cols []int) []string {
	out := make([]string, 0, len(cols))
	for _, c := range cols {
		if c < len(row) {
			out = append(out, row[c])
		}
	}
	return out
}

// writeTargets prints each target on a line: verdict, name and what was
// measured, the measured part on the next lines when the line would be too
// wide.
func writeTargets(w io.Writer, ts []Target) {
	nameW := 0
	for _, t := range ts {
		nameW = max(nameW, utf8.RuneCountInString(t.Name))
	}
	for _, t := range ts {
		head := fmt.Sprintf("  %-6s %s", t.Verdict(), t.Name)
		line := head + strings.Repeat(" ", nameW-utf8.RuneCountInString(t.Name)) + "  " + t.Measured
		if utf8.RuneCountInString(line) <= TextWidth {
			fmt.Fprintln(w, line)
			continue
		}
		fmt.Fprintln(w, head)
		for _, l := range wrap(t.Measured, TextWidth-9, "") {
			fmt.Fprintln(w, strings.Repeat(" ", 9)+l)
		}
	}
}

// writeWrapped prints text wrapped at TextWidth, the lines after the first
// indented by indent.
func writeWrapped(w io.Writer, text, indent string) {
	for _, l := range wrap(text, TextWidth, indent) {
		fmt.Fprintln(w, l)
	}
}

// wrap breaks text into lines of at most width runes at spaces (a word
// longer than a line stays whole), the lines after the first starting with
// indent.
func wrap(text string, width int, indent string) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
			if len(lines) > 0 {
				line = indent + word
			}
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = indent + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// waiterResults returns the waiters rows that ran.
func waiterResults(rep *Perf) []Result {
	var ws []Result
	for _, r := range rep.Results {
		if r.Scenario == "waiters" && !r.Skipped {
			ws = append(ws, r)
		}
	}
	return ws
}
