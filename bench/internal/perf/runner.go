package perf

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// sizes says how much each scenario measures; quick and full runs differ
// only here. The interleaved scenarios run in rounds: in each round every
// lock runs one short slice, in turn (raw, naive, ..., lease, ..., the
// peers), so a change in the machine's load falls on all of them alike and
// the figures of one round can be compared as pairs.
type sizes struct {
	rounds      int           // uncontended: rounds
	batch       int           // uncontended: sequential ops per lock per round
	parRounds   int           // parallel: rounds
	slice       time.Duration // parallel: duration per lock per round
	workers     int           // parallel: goroutines
	wakeRounds  int           // wake: rounds
	wakeSamples int           // wake: samples per lock per round
	wakeBlock   [2]time.Duration
	hotRounds   int           // hotkey, hotkey64: rounds
	hotSlice    time.Duration // hotkey, hotkey64: duration per lock (and the sleep ceiling) per round
	hotHold     time.Duration
	waiters     int           // waiters: goroutines waiting
	waiterKeys  int           // waiters: keys they wait on (waiters/waiterKeys each)
	waitSettle  time.Duration // waiters: from starting them to the first CLIENT LIST
	waitWindow  time.Duration // waiters: the window whose CPU time is measured
	pgRounds    int
	pgBatch     int
	costOps     int // cost: acquire+releases per lock
}

var (
	fullSizes = sizes{rounds: 20, batch: 200, parRounds: 12, slice: 300 * time.Millisecond, workers: 64,
		wakeRounds: 10, wakeSamples: 20, wakeBlock: [2]time.Duration{10 * time.Millisecond, 40 * time.Millisecond},
		hotRounds: 6, hotSlice: 500 * time.Millisecond, hotHold: time.Millisecond,
		waiters: 1000, waiterKeys: 100, waitSettle: time.Second, waitWindow: 2 * time.Second,
		pgRounds: 10, pgBatch: 200, costOps: 500}
	quickSizes = sizes{rounds: 5, batch: 40, parRounds: 4, slice: 100 * time.Millisecond, workers: 64,
		wakeRounds: 4, wakeSamples: 5, wakeBlock: [2]time.Duration{5 * time.Millisecond, 15 * time.Millisecond},
		hotRounds: 2, hotSlice: 300 * time.Millisecond, hotHold: time.Millisecond,
		waiters: 100, waiterKeys: 10, waitSettle: 300 * time.Millisecond, waitWindow: time.Second,
		pgRounds: 3, pgBatch: 50, costOps: 100}
)

// runner holds what every scenario shares: the run id that keeps keys
// apart from other runs, the sizes, and the progress.
type runner struct {
	id       string
	sizes    sizes
	progress *report.Progress
}

func newRunner(progress io.Writer, quick bool) *runner {
	r := &runner{id: fmt.Sprintf("%08x", rand.Uint32()), sizes: fullSizes,
		progress: report.NewProgress(progress, "perf", 10*time.Second)}
	if quick {
		r.sizes = quickSizes
	}
	return r
}

// key names a key of lock l in scenario s: distinct per run, lock, scenario
// and i. Lock names go through fence.ValidateKey: no braces.
func (r *runner) key(l *locks.Lock, s string, i int) string {
	return fmt.Sprintf("bench-%s:%s:%s:%d", r.id, l.Name, s, i)
}

// step reports lock's progress in scenario: i of n.
func (r *runner) step(scenario, lock string, i, n int) {
	r.progress.Step(scenario, fmt.Sprintf("%-12s %d/%d", lock, i, n))
}

func (r *runner) status(msg string) { r.progress.Step(msg, "") }

func (r *runner) done() { r.progress.Done() }
