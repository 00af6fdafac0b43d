package perf

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// hotkeyWorkers is the workers of each hotkey scenario: the same run with
// 8 and with 64, each a row of its own.
var hotkeyWorkers = map[string]int{"hotkey": 8, "hotkey64": 64}

// hotkey runs workers on one key, each holding the lock for hold per
// critical section, using the library's waiting acquire; it reports
// critical sections per second and each worker's share.
func hotkey(ctx context.Context, run *runner, l *locks.Lock, scenario string, workers int) report.Result {
	res := report.Result{Lock: l.Name, Scenario: scenario, Workers: workers}
	if !l.CanWait() {
		res.Skipped, res.Note = true, "no waiting acquire in this lock"
		return res
	}
	sz := run.sizes
	run.step(scenario, l.Name, 0, 1)
	key := run.key(l, scenario, 0)
	counts := make([]int, workers)
	var errs errorLog
	deadline := time.Now().Add(sz.hotDuration)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// over is whether the run's end caused an error: a dial can time out on
	// the deadline a moment before wctx says it is done.
	over := func() bool { return wctx.Err() != nil || time.Until(deadline) < time.Millisecond }
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for wctx.Err() == nil {
				h, err := l.Wait(wctx, key)
				if err != nil {
					if !over() {
						errs.add(err)
					}
					continue
				}
				time.Sleep(sz.hotHold)
				if !over() {
					counts[w]++
				}
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
				if err := h.Release(rctx); err != nil {
					errs.add(err)
				}
				rcancel()
			}
		})
	}
	wg.Wait()
	elapsed := min(time.Since(t0), sz.hotDuration)
	total := 0
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		total += c
		lo, hi = min(lo, c), max(hi, c)
	}
	res.Samples = total
	errs.fill(&res)
	res.OpsPerSec = report.Ptr(float64(total) / elapsed.Seconds())
	if total > 0 {
		res.MinShare = report.Ptr(float64(lo) / float64(total))
		res.MaxShare = report.Ptr(float64(hi) / float64(total))
	}
	res.Note = fmt.Sprintf("%d workers, one key, %v held; fair share %.3f", workers, sz.hotHold, 1/float64(workers))
	return res
}
