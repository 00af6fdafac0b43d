package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A question is one table of the perf report: what someone choosing a
// lock asks, the figures that answer it, and how to read them. The text
// table and the HTML page both render it, so both say the same.
type question struct {
	id      string // HTML anchor
	title   string // the question
	caption string // what was measured
	head    []string
	rows    [][]string
	left    int      // columns from the left that are text (left-aligned), the rest figures
	wrapCol int      // index of a column whose text may wrap (errors), -1 for none
	notes   []string // how to read it
}

// TextWidth is the most columns a line of the text report takes.
const TextWidth = 100

// roundsText is "min–max (IQR n%)" of r's figure over the rounds, or "—".
func roundsText(r *Result, format string) string {
	if s, ok := SpreadOf(r); ok && s.Rounds > 1 {
		return s.Text(format, "")
	}
	return "—"
}

// fmtRatio is a ratio to two decimals, or "—".
func fmtRatio(p *float64) string {
	if p == nil || math.IsNaN(*p) {
		return "—"
	}
	switch {
	case *p >= 100:
		return fmt.Sprintf("%.0f", *p)
	case *p >= 10:
		return fmt.Sprintf("%.1f", *p)
	}
	return fmt.Sprintf("%.2f", *p)
}

// WakeText says a wake-up time for people: "before release returned"
// when the waiter had the lock before the holder's Release returned
// (0 µs), else µs, ms or s.
func WakeText(p *float64) string {
	switch {
	case p == nil:
		return "—"
	case *p <= 0:
		return "before release returned"
	}
	return fmtDurFine(*p)
}

// fmtCount is a per-op count: whole when it is near one, else to one
// decimal; "—" when missing.
func fmtCount(p *float64) string {
	if p == nil || math.IsNaN(*p) {
		return "—"
	}
	if math.Abs(*p-math.Round(*p)) < 0.05 {
		return fmt.Sprintf("%.0f", *p)
	}
	return fmt.Sprintf("%.1f", *p)
}

// CommandsText says the commands of one op, the most frequent first:
// "EVALSHA×2, SET×2, DEL, GET". A command run in fewer than a tenth of the
// ops is left out; "—" when there is none.
func CommandsText(per map[string]float64) string {
	type cmd struct {
		name string
		n    float64
	}
	var cs []cmd
	for name, n := range per {
		if n >= 0.1 {
			cs = append(cs, cmd{strings.ToUpper(name), n})
		}
	}
	if len(cs) == 0 {
		return "—"
	}
	slices.SortFunc(cs, func(a, b cmd) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.name
		if n := fmtCount(&c.n); n != "1" {
			parts[i] += "×" + n
		}
	}
	return strings.Join(parts, ", ")
}

// fmtDurFine formats microseconds with one decimal: "115.8 µs", "9.6 ms".
func fmtDurFine(v float64) string { return durText(v, 1) }

// scenarioResults returns the results of scenario that ran, in run order.
func scenarioResults(rep *Perf, scenario string) []*Result {
	var out []*Result
	for i := range rep.Results {
		if r := &rep.Results[i]; r.Scenario == scenario && !r.Skipped {
			out = append(out, r)
		}
	}
	return out
}

func resultErrors(r *Result) string {
	return errorsOf([]Result{*r}, func(*Result) bool { return true })
}

// bestPeerOf is the best peer the results of rs were paired with.
func bestPeerOf(rs []*Result) string {
	for _, r := range rs {
		if r.BestPeer != "" {
			return r.BestPeer
		}
	}
	return ""
}

// roundsOf is how many rounds the results of rs ran (0: not interleaved).
func roundsOf(rs []*Result) int {
	for _, r := range rs {
		if len(r.PerRound) > 0 {
			return len(r.PerRound)
		}
	}
	return 0
}

// pairingOf says how the rows of rs (the locks, or the writes) took turns.
func pairingOf(rs []*Result, what string) string {
	n := roundsOf(rs)
	if n == 0 {
		return "not interleaved"
	}
	s := fmt.Sprintf("%d rounds, the %s in turn in each", n, what)
	if b := bestPeerOf(rs); b != "" {
		s += "; best peer: " + b
	}
	return s
}

// questions builds the report's tables, in the order a reader asks.
func questions(rep *Perf) []question {
	var qs []question
	pairing := func(rs []*Result) string { return pairingOf(rs, "locks") }
	ratioNote := "×raw, ×best peer: the median over the rounds of this lock's figure over raw's (the best peer's) in the same round."

	if rs := scenarioResults(rep, "uncontended"); len(rs) > 0 {
		q := question{id: "uncontended", title: "How fast is a lock uncontended?",
			caption: "acquire + release, one at a time, distinct keys (" + pairing(rs) + ")",
			head:    []string{"lock", "p50 µs", "p99 µs", "×raw", "×best peer", "p50 over the rounds", "errors"}, left: 1, wrapCol: 6,
			notes: []string{ratioNote + " Lower is faster."}}
		for _, r := range rs {
			q.rows = append(q.rows, []string{r.Lock, fmtUs(r.P50us), fmtUs(r.P99us), fmtRatio(r.VsRaw), fmtRatio(r.VsBest), roundsText(r, "%.0f"), resultErrors(r)})
		}
		qs = append(qs, q)
	}
	if rs := scenarioResults(rep, "cost"); len(rs) > 0 {
		q := question{id: "cost", title: "What does one acquire + release cost?",
			caption: "each lock alone, one at a time on distinct keys, after a warm-up (not timed: neither figure depends on the load)",
			head:    []string{"lock", "allocs/op", "B/op", "cmds/op", "errors", "commands per op"}, left: 1, wrapCol: 5,
			notes: []string{"allocs/op, B/op: the bench process's (runtime.MemStats), one of them the bench's own Hold. cmds/op: what the lock's servers ran (INFO commandstats, summed over its nodes; a script's commands count), which is what the lock costs a shared Redis."}}
		for _, r := range rs {
			q.rows = append(q.rows, []string{r.Lock, fmtCount(r.AllocsPerOp), fmtF("%.0f")(r.BytesPerOp), fmtCount(r.CmdsPerOp), resultErrors(r), CommandsText(r.Commands)})
		}
		qs = append(qs, q)
	}
	if rs := scenarioResults(rep, "parallel"); len(rs) > 0 {
		workers := "many"
		if n := noteWorkers(rs[0].Note); rs[0].Workers > 0 {
			workers = fmt.Sprint(rs[0].Workers)
		} else if n != "" { // a run recorded before parallel's workers
			workers = n
		}
		q := question{id: "parallel", title: "How much does it do in parallel?",
			caption: "acquire + release per second, " + workers + " goroutines, distinct keys (" + pairing(rs) + ")",
			head:    []string{"lock", "ops/s", "×raw", "×best peer", "ops/s over the rounds", "errors"}, left: 1, wrapCol: 5,
			notes: []string{ratioNote + " Higher is more."}}
		for _, r := range rs {
			q.rows = append(q.rows, []string{r.Lock, fmtOps(r.OpsPerSec), fmtRatio(r.VsRaw), fmtRatio(r.VsBest), roundsText(r, "%.0f"), resultErrors(r)})
		}
		qs = append(qs, q)
	}
	for _, s := range []string{"hotkey", "hotkey64"} {
		rs := scenarioResults(rep, s)
		if len(rs) == 0 {
			continue
		}
		w := rs[0].Workers
		hold, holdD, ok := holdOf(append(rs, ceilingOf(rep, s))...)
		holding, sleep := "each holding the lock "+hold, fmt.Sprintf("time.Sleep(%v)", holdD)
		if !ok {
			holding, sleep = "each holding the lock a while", "time.Sleep of the hold"
		}
		q := question{id: s, title: fmt.Sprintf("How fair is it under contention? (%d workers on one key)", w),
			caption: fmt.Sprintf("critical sections a second, %s (%s)", holding, pairing(rs)),
			head:    []string{"lock", "cs/s", "×best peer", "×ceiling", fmt.Sprintf("shares (fair %.3f)", 1/float64(max(w, 1))), "cs/s over the rounds", "errors"},
			left:    1, wrapCol: 6}
		for _, r := range rs {
			q.rows = append(q.rows, []string{r.Lock, fmtOps(r.OpsPerSec), fmtRatio(r.VsBest), fmtRatio(r.VsCeiling),
				fmtShare(r.MinShare) + "–" + fmtShare(r.MaxShare), roundsText(r, "%.0f"), resultErrors(r)})
		}
		if c := ceilingOf(rep, s); c != nil && c.OpsPerSec != nil {
			q.rows = append(q.rows, []string{"sleep ceiling", fmtOps(c.OpsPerSec), "—", "1.00", "—", roundsText(c, "%.0f"), "—"})
			q.notes = append(q.notes, fmt.Sprintf("sleep ceiling: %s alone, in the same rounds: %s a sleep here, so no lock can pass %.0f critical sections a second. ×ceiling: the median over the rounds of the lock's cs/s over the ceiling's.",
				sleep, fmtDurFine(deref64(c.P50us)), *c.OpsPerSec))
		}
		q.notes = append(q.notes, "shares: the smallest and largest worker's share of the critical sections, the medians over the rounds. ×best peer: as above; higher is more.")
		qs = append(qs, q)
	}
	if rs := scenarioResults(rep, "wake"); len(rs) > 0 {
		q := question{id: "wake", title: "How fast does a waiter wake?",
			caption: "from the holder's Release returning to the blocked waiter's acquire returning (" + pairing(rs) + ")",
			head:    []string{"lock", "p50", "p99", "×best peer", "waiter first", "errors"}, left: 1, wrapCol: 5,
			notes: []string{"before release returned: the waiter had the lock before the holder's Release call returned (a hand-off that needs no round trip of the waiter's own). waiter first: the share of samples where it did.",
				"×best peer: as above, lower is faster (— when the lock's own p50 came before the release returned, or the best peer's did in most rounds)."}}
		for _, r := range rs {
			first := "—"
			if r.Samples > 0 && len(r.PerRound) > 0 {
				first = fmt.Sprintf("%.0f%%", 100*float64(r.BeforeRelease)/float64(r.Samples))
			}
			vs := fmtRatio(r.VsBest)
			if r.P50us != nil && *r.P50us <= 0 {
				vs = "—"
			}
			q.rows = append(q.rows, []string{r.Lock, WakeText(r.P50us), WakeText(r.P99us), vs, first, resultErrors(r)})
		}
		qs = append(qs, q)
	}
	if ws := waiterResults(rep); len(ws) > 0 {
		q := question{id: "waiters", title: fmt.Sprintf("What do %s cost?", thousands(ws[0].Workers, "waiter")),
			caption: fmt.Sprintf("%s in the lock's own waiting acquire on %s held by others; each lock alone, one after another (not interleaved)",
				thousands(ws[0].Workers, "goroutine"), Plural(ws[0].Keys, "key")),
			head: []string{"lock", "conns", "pub/sub", "server conns", "CPU s/s", "acquired", "all acquired", "errors"}, left: 1, wrapCol: 7,
			notes: []string{"conns, pub/sub: the lock's own client's connections (CLIENT LIST, by name) while they wait, and of those in pub/sub; server conns: every connection on its servers.",
				"CPU s/s: the bench's CPU time per wall second while they wait. all acquired: from the holders' release to the last waiter's acquire."}}
		for _, r := range ws {
			all := "—"
			if r.AllAcquiredMs != nil {
				all = fmtDurFine(*r.AllAcquiredMs * 1e3)
			}
			q.rows = append(q.rows, []string{r.Lock, fmtInt(r.Conns), fmtInt(r.PubSubConns), fmtInt(r.ServerConns), fmtCPU(r.CPUPerSec),
				fmt.Sprint(r.Samples), all, resultErrors(&r)})
		}
		qs = append(qs, q)
	}
	var shapes []*Result
	for i := range rep.Results {
		if IsWriteShape(rep.Results[i]) {
			shapes = append(shapes, &rep.Results[i])
		}
	}
	if len(shapes) > 0 {
		q := question{id: "database", title: "What does the database guard cost?",
			caption: "one UPDATE in a transaction, with and without the verifier's guard, one connection (" + pairingOf(shapes, "writes") + ")",
			head:    []string{"database", "write", "p50 µs", "p99 µs", "tx/s", "×unguarded", "errors"}, left: 2, wrapCol: 6,
			notes: []string{"×unguarded: the median over the rounds of this write's p50 over the unguarded write's on the same database in the same round (in a run without rounds, the ratio of the whole p50s)."}}
		for _, r := range shapes {
			group, _, _ := strings.Cut(r.Scenario, "_")
			vs, _ := Ratio(r, Find(rep.Results, r.Lock, group+"_unguarded"), func(r *Result) *float64 { return r.P50us })
			q.rows = append(q.rows, []string{r.Lock, r.Scenario, fmtUs(r.P50us), fmtUs(r.P99us), fmtOps(r.OpsPerSec), fmtRatio(vs), resultErrors(r)})
		}
		qs = append(qs, q)
	}
	qs = append(qs, semQuestions(rep)...)
	return append(qs, serverQuestions(rep)...)
}

// ceilingOf is the sleep ceiling measured with scenario, or nil.
func ceilingOf(rep *Perf, scenario string) *Result {
	for i := range rep.Ceilings {
		if rep.Ceilings[i].Scenario == scenario {
			return &rep.Ceilings[i]
		}
	}
	return nil
}

// noise says how noisy the run was: how the floor's figures (raw's, and
// the sleep ceiling's) varied over the rounds.
func noise(rep *Perf) []string {
	var out []string
	if r := Find(rep.Results, "raw", "uncontended"); r != nil {
		if s, ok := SpreadOf(r); ok && s.Rounds > 1 {
			out = append(out, fmt.Sprintf("raw uncontended p50 %s over %d rounds", s.Text("%.0f", "µs"), s.Rounds))
		}
	}
	if r := Find(rep.Results, "raw", "parallel"); r != nil {
		if s, ok := SpreadOf(r); ok && s.Rounds > 1 {
			out = append(out, fmt.Sprintf("raw parallel %s", s.Text("%.0f", "ops/s")))
		}
	}
	if c := ceilingOf(rep, "hotkey"); c != nil {
		if s, ok := SpreadOf(c); ok && s.Rounds > 1 {
			out = append(out, fmt.Sprintf("sleep ceiling %s", s.Text("%.0f", "cs/s")))
		}
	}
	return out
}

// noteWorkers is the "64" of a note that starts "64 goroutines".
func noteWorkers(note string) string {
	if n, _, ok := strings.Cut(note, " goroutines"); ok && !strings.ContainsAny(n, " ,;") {
		return n
	}
	return ""
}

// thousands is n and the noun, with a thousands separator: "1,000 waiters".
func thousands(n int, noun string) string {
	s := Plural(n, noun)
	if n >= 1000 {
		num, rest, _ := strings.Cut(s, " ")
		s = num[:len(num)-3] + "," + num[len(num)-3:] + " " + rest
	}
	return s
}

func deref64(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
