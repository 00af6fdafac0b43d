package report

import (
	"fmt"
	"strings"
)

// semQuestions are the tables of the semaphore rows (sem_uncontended,
// sem_cost, sem_hotkey, sem_waiters): fencelock's semaphore against the
// naive one and, uncontended, the raw lock.
func semQuestions(rep *Perf) []question {
	var qs []question
	n := func(rs []*Result) int {
		for _, r := range rs {
			if r.Permits > 0 {
				return r.Permits
			}
		}
		return 0
	}
	naive := func(scenario string) *Result { return Find(rep.Results, "naive-sem", scenario) }
	if rs := scenarioResults(rep, "sem_uncontended"); len(rs) > 0 {
		q := question{id: "sem_uncontended", title: fmt.Sprintf("How fast is a semaphore's permit uncontended? (%d permits)", n(rs)),
			caption: "acquire + release of a permit, one at a time, a new semaphore name each; raw: a lock, the floor (" + pairingOf(rs, "locks") + ")",
			head:    []string{"lock", "p50 µs", "p99 µs", "×raw", "×naive-sem", "allocs/op", "cmds/op", "p50 over the rounds", "errors"}, left: 1, wrapCol: 8,
			notes: []string{"×raw, ×naive-sem: the median over the rounds of this row's p50 over raw's (naive-sem's) in the same round; lower is faster. allocs/op, cmds/op: as in the cost table, each alone on one name (sem_cost)."}}
		var cmds []string
		for _, r := range rs {
			c := Find(rep.Results, r.Lock, "sem_cost")
			vs, _ := Ratio(r, naive("sem_uncontended"), p50)
			q.rows = append(q.rows, []string{r.Lock, fmtUs(r.P50us), fmtUs(r.P99us), fmtRatio(r.VsRaw), fmtRatio(vs),
				fmtCount(Field(c, func(r *Result) *float64 { return r.AllocsPerOp })),
				fmtCount(Field(c, func(r *Result) *float64 { return r.CmdsPerOp })), roundsText(r, "%.0f"), resultErrors(r)})
			if c != nil && len(c.Commands) > 0 {
				cmds = append(cmds, r.Lock+" "+CommandsText(c.Commands))
			}
		}
		if len(cmds) > 0 {
			q.notes = append(q.notes, "commands per acquire+release: "+strings.Join(cmds, "; ")+".")
		}
		qs = append(qs, q)
	}
	if rs := scenarioResults(rep, "sem_hotkey"); len(rs) > 0 {
		w := rs[0].Workers
		c := ceilingOf(rep, "sem_hotkey")
		hold, _, ok := holdOf(append(rs, c)...)
		holding := "each holding its permit " + hold
		if !ok {
			holding = "each holding its permit a while"
		}
		q := question{id: "sem_hotkey", title: fmt.Sprintf("How fair is a semaphore under contention? (%d workers, %d permits)", w, n(rs)),
			caption: fmt.Sprintf("critical sections a second, %s (%s)", holding, pairingOf(rs, "semaphores")),
			head:    []string{"lock", "cs/s", "×ceiling", fmt.Sprintf("shares (fair %.3f)", 1/float64(max(w, 1))), "cs/s over the rounds", "errors"},
			left:    1, wrapCol: 5,
			notes: []string{"shares: the smallest and largest worker's share of the critical sections, the medians over the rounds (as for the locks' hot key)."}}
		for _, r := range rs {
			q.rows = append(q.rows, []string{r.Lock, fmtOps(r.OpsPerSec), fmtRatio(r.VsCeiling),
				fmtShare(r.MinShare) + "–" + fmtShare(r.MaxShare), roundsText(r, "%.0f"), resultErrors(r)})
		}
		if c != nil && c.OpsPerSec != nil {
			q.rows = append(q.rows, []string{"sleep ceiling", fmtOps(c.OpsPerSec), "1.00", "—", roundsText(c, "%.0f"), "—"})
			q.notes = append(q.notes, fmt.Sprintf("sleep ceiling: %d sleepers' worth, timed in the same rounds: no semaphore of %d permits can pass %.0f critical sections a second here. ×ceiling: the median over the rounds of the row's cs/s over the ceiling's.",
				n(rs), n(rs), *c.OpsPerSec))
		}
		qs = append(qs, q)
	}
	if rs := scenarioResults(rep, "sem_waiters"); len(rs) > 0 {
		q := question{id: "sem_waiters", title: fmt.Sprintf("How long until %s got a permit each? (%d permits)", thousands(rs[0].Workers, "waiter"), n(rs)),
			caption: fmt.Sprintf("%s in the semaphore's waiting acquire, every permit held; then released; each alone, one after the other (not interleaved)",
				thousands(rs[0].Workers, "goroutine")),
			head: []string{"lock", "got", "all got + released", "cmds/waiter", "errors"}, left: 1, wrapCol: 4,
			notes: []string{"all got + released: from the holders' release to the last waiter's Release returning, each waiter having taken a permit and released it at once. cmds/waiter: what the server ran meanwhile, per waiter."}}
		var cmds []string
		for _, r := range rs {
			all := "—"
			if r.AllAcquiredMs != nil {
				all = fmtDurFine(*r.AllAcquiredMs * 1e3)
			}
			q.rows = append(q.rows, []string{r.Lock, fmt.Sprint(r.Samples), all, fmtCount(r.CmdsPerOp), resultErrors(r)})
			if len(r.Commands) > 0 {
				cmds = append(cmds, r.Lock+" "+CommandsText(r.Commands))
			}
		}
		if len(cmds) > 0 {
			q.notes = append(q.notes, "commands per waiter: "+strings.Join(cmds, "; ")+".")
		}
		qs = append(qs, q)
	}
	return qs
}
