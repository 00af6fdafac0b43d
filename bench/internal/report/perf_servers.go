package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencelock/fencelock/bench/internal/locks"
)

// serverScenarios are the scenarios the servers question compares, with
// their figure and how it reads.
var serverScenarios = []struct {
	scenario, figure string
	fig              func(*Result) *float64
	text             func(*float64) string
}{
	{"uncontended", "p50 µs", p50, fmtUs},
	{"parallel", "ops/s", ops, fmtOps},
	{"wake", "p50", p50, WakeText},
	{"hotkey", "cs/s", ops, fmtOps},
	{"hotkey64", "cs/s", ops, fmtOps},
}

// serverQuestions are the tables of the locks that also ran on other
// servers than the run's first (rows named lock@kind): per other kind of
// server, each lock's figure on both and their ratio, paired by round.
func serverQuestions(rep *Perf) []question {
	first, _, _ := strings.Cut(serverText(rep.Machine.Redis), " ")
	var kinds []string
	for _, r := range rep.Results {
		if _, kind := locks.SplitServer(r.Lock); kind != "" && !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	var qs []question
	for _, kind := range kinds {
		q := question{id: "server-" + kind, title: fmt.Sprintf("What does moving from %s to %s cost?", first, kind),
			caption: fmt.Sprintf("the same lock on a throwaway %s and %s, taking turns in the same rounds as the others", first, kind),
			head:    []string{"scenario", "lock", "figure", "on " + first, "on " + kind, kind + " ×" + first, "over the rounds (" + kind + ")"},
			left:    3, wrapCol: -1,
			notes: []string{
				fmt.Sprintf("%s ×%s: the median over the rounds of the lock's figure on %s over its figure on %s in the same round; "+
					"for p50 lower is faster, for ops/s and cs/s higher is more. Noisy on a loaded machine: read the ratios, not the absolute figures.", kind, first, kind, first),
				fmt.Sprintf("In the tables above, a row lock@%s has its ×raw against raw@%s in the same round, and no ×best peer (the peers ran on %s only).", kind, kind, first),
			}}
		for _, s := range serverScenarios {
			for _, r := range scenarioResults(rep, s.scenario) {
				base, k := locks.SplitServer(r.Lock)
				if k != kind {
					continue
				}
				on := Find(rep.Results, base, s.scenario)
				vs, _ := Ratio(r, on, s.fig)
				q.rows = append(q.rows, []string{s.scenario, base, s.figure, s.text(Field(on, s.fig)), s.text(s.fig(r)), fmtRatio(vs), roundsText(r, "%.0f")})
			}
		}
		if len(q.rows) > 0 {
			qs = append(qs, q)
		}
	}
	return qs
}
