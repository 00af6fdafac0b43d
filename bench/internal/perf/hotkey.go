package perf

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// hotkeyWorkers is the workers of each hotkey scenario: the same run with
// 8 and with 64, each a row of its own.
var hotkeyWorkers = map[string]int{"hotkey": 8, "hotkey64": 64}

// sleepCeiling names the ceiling's row in the progress and the report.
const sleepCeiling = "time.Sleep"

// hotkey runs workers on one key per lock, each holding the lock for
// hotHold per critical section, using the library's waiting acquire;
// interleaved: in each round the sleep ceiling (time.Sleep(hotHold) in a
// loop, the most critical sections a second any lock can give) and every
// lock with a waiting acquire run a slice, in turn (each round starting
// one further on, see interleave). It reports critical sections per
// second, their ratio to the ceiling's, and the smallest and largest
// worker share (the medians over the rounds of each round's). For
// semaphores of permits permits (1 for a lock) the ceiling is permits
// sleepers'. It returns the locks' results and the ceiling's.
func hotkey(ctx context.Context, run *runner, ls []*locks.Lock, scenario string, workers, permits int) ([]report.Result, report.Result) {
	sz := run.sizes
	can, idx, out := waiting(ls, scenario)
	for i := range out {
		out[i].Workers = workers
	}
	shares := make([][2][]float64, len(can)) // per lock: each round's smallest and largest share
	total := make([]int, len(can))
	spent := make([]time.Duration, len(can))
	errs := make([]errorLog, len(can))
	var sleeps int
	var slept time.Duration
	figs := interleave(ctx, run, scenario, sz.hotRounds, append([]string{sleepCeiling}, names(can)...), func(round, i int) float64 {
		if i == 0 {
			n, d := sleepLoop(sz.hotHold, sz.hotSlice)
			sleeps, slept = sleeps+n, slept+d
			return float64(permits*n) / d.Seconds()
		}
		i--
		counts, d := hotSlice(ctx, run, can[i], scenario, round, workers, &errs[i])
		n := 0
		for _, c := range counts {
			n += c
		}
		total[i] += n
		spent[i] += d
		if n > 0 {
			shares[i][0] = append(shares[i][0], float64(slices.Min(counts))/float64(n))
			shares[i][1] = append(shares[i][1], float64(slices.Max(counts))/float64(n))
		}
		return float64(n) / d.Seconds()
	})
	ceiling := report.Result{Lock: sleepCeiling, Scenario: scenario, Samples: sleeps, PerRound: figs[0],
		Note: fmt.Sprintf("time.Sleep(%v) in a loop, %d rounds × %v, interleaved with the locks: the most critical sections a second a lock can give", sz.hotHold, sz.hotRounds, sz.hotSlice)}
	if permits > 1 {
		ceiling.Note = fmt.Sprintf("%d × time.Sleep(%v) in a loop (one loop timed), %d rounds × %v, interleaved with the semaphores: the most critical sections a second %d permits can give",
			permits, sz.hotHold, sz.hotRounds, sz.hotSlice, permits)
	}
	hold := report.Ptr(float64(sz.hotHold) / float64(time.Millisecond))
	ceiling.HoldMs = hold
	if sleeps > 0 {
		ceiling.OpsPerSec = report.Ptr(float64(permits*sleeps) / slept.Seconds())
		ceiling.P50us = report.Ptr(us(slept) / float64(sleeps)) // the mean sleep
	}
	for i, l := range can {
		r := report.Result{Lock: l.Name, Scenario: scenario, Workers: workers, HoldMs: hold, Samples: total[i], PerRound: figs[i+1],
			Note: fmt.Sprintf("%d workers, one key, %v held; fair share %.3f; %d rounds × %v per lock, interleaved; shares: medians over the rounds",
				workers, sz.hotHold, 1/float64(workers), sz.hotRounds, sz.hotSlice)}
		if permits > 1 {
			r.Permits = permits
			r.Note = fmt.Sprintf("%d workers, one semaphore of %d permits, %v held; fair share %.3f; %d rounds × %v per semaphore, interleaved; shares: medians over the rounds",
				workers, permits, sz.hotHold, 1/float64(workers), sz.hotRounds, sz.hotSlice)
		}
		if spent[i] > 0 {
			r.OpsPerSec = report.Ptr(float64(total[i]) / spent[i].Seconds())
		}
		if len(shares[i][0]) > 0 {
			r.MinShare, r.MaxShare = report.Ptr(report.Median(shares[i][0])), report.Ptr(report.Median(shares[i][1]))
		}
		r.VsCeiling = report.PairedRatio(&r, &ceiling)
		errs[i].fill(&r)
		out[idx[i]] = r
	}
	pairUp(out, ops, false)
	return out, ceiling
}

// sleepLoop sleeps hold again and again for about d and returns how many
// times and how long it took.
func sleepLoop(hold, d time.Duration) (int, time.Duration) {
	t0 := time.Now()
	n := 0
	for time.Since(t0) < d {
		time.Sleep(hold)
		n++
	}
	return n, time.Since(t0)
}

// hotSlice runs workers on a key of its own for sz.hotSlice and returns the
// critical sections of each worker and the time they had.
func hotSlice(ctx context.Context, run *runner, l *locks.Lock, scenario string, round, workers int, errs *errorLog) ([]int, time.Duration) {
	sz := run.sizes
	key := run.key(l, scenario, round)
	counts := make([]int, workers)
	deadline := time.Now().Add(sz.hotSlice)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// over is whether the slice's end caused an error: a dial can time out
	// on the deadline a moment before wctx says it is done.
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
	return counts, min(time.Since(t0), sz.hotSlice)
}
