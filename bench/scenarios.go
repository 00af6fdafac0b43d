package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// sizes says how much each scenario measures; quick and full runs differ
// only here.
type sizes struct {
	rounds      int           // uncontended and parallel: rounds, locks interleaved within each
	batch       int           // uncontended: sequential ops per lock per round
	slice       time.Duration // parallel: duration per lock per round
	workers     int           // parallel: goroutines
	wakeSamples int           // wake: samples per lock
	wakeBlock   [2]time.Duration
	hotDuration time.Duration // hotkey: duration per lock
	hotWorkers  int
	hotHold     time.Duration
	pgRounds    int
	pgBatch     int
}

var (
	fullSizes = sizes{rounds: 10, batch: 500, slice: 400 * time.Millisecond, workers: 64,
		wakeSamples: 200, wakeBlock: [2]time.Duration{10 * time.Millisecond, 40 * time.Millisecond},
		hotDuration: 3 * time.Second, hotWorkers: 8, hotHold: time.Millisecond,
		pgRounds: 10, pgBatch: 200}
	quickSizes = sizes{rounds: 3, batch: 100, slice: 150 * time.Millisecond, workers: 64,
		wakeSamples: 20, wakeBlock: [2]time.Duration{5 * time.Millisecond, 15 * time.Millisecond},
		hotDuration: 600 * time.Millisecond, hotWorkers: 8, hotHold: time.Millisecond,
		pgRounds: 3, pgBatch: 50}
)

// opTimeout bounds each acquire+release, so a stuck server fails the run
// instead of hanging it.
const opTimeout = 5 * time.Second

// acquireRelease is one uncontended acquire (a single attempt) and release.
func acquireRelease(ctx context.Context, l locker, key string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rel, err := l.try(ctx, key)
	if err != nil {
		return err
	}
	return rel(ctx)
}

// uncontended measures sequential acquire+release latency on distinct keys.
// The locks take turns in batches, round after round, so that a change in
// the machine's load falls on all of them alike.
func uncontended(ctx context.Context, run *runner, locks []locker) []Result {
	sz := run.sizes
	samples := make([][]time.Duration, len(locks))
	errs := make([]errorLog, len(locks))
	for i, l := range locks { // warm up: connections, script cache
		for j := range 50 {
			if err := acquireRelease(ctx, l, run.key(l, "warm", j)); err != nil {
				errs[i].add(err)
			}
		}
	}
	for round := range sz.rounds {
		for i, l := range locks {
			run.progress("uncontended", l.name, round+1, sz.rounds)
			for j := range sz.batch {
				key := run.key(l, "u", j)
				t0 := time.Now()
				err := acquireRelease(ctx, l, key)
				d := time.Since(t0)
				if err != nil {
					errs[i].add(err)
					continue
				}
				samples[i] = append(samples[i], d)
			}
		}
	}
	out := make([]Result, len(locks))
	for i, l := range locks {
		out[i] = Result{Lock: l.name, Scenario: "uncontended"}
		errs[i].fill(&out[i])
		out[i].setLatency(samples[i])
	}
	return out
}

// parallel measures acquire+release throughput with many goroutines, each
// on its own key. Locks take turns in slices, as in uncontended.
func parallel(ctx context.Context, run *runner, locks []locker) []Result {
	sz := run.sizes
	ops := make([]int64, len(locks))
	errs := make([]errorLog, len(locks))
	spent := make([]time.Duration, len(locks))
	for round := range sz.rounds {
		for i, l := range locks {
			run.progress("parallel", l.name, round+1, sz.rounds)
			var n atomic.Int64
			stop := time.Now().Add(sz.slice)
			var wg sync.WaitGroup
			t0 := time.Now()
			for g := range sz.workers {
				wg.Go(func() {
					key := run.key(l, "p", g)
					for time.Now().Before(stop) {
						if err := acquireRelease(ctx, l, key); err != nil {
							errs[i].add(err)
							continue
						}
						n.Add(1)
					}
				})
			}
			wg.Wait()
			spent[i] += time.Since(t0)
			ops[i] += n.Load()
		}
	}
	out := make([]Result, len(locks))
	for i, l := range locks {
		out[i] = Result{Lock: l.name, Scenario: "parallel", Samples: int(ops[i]),
			OpsPerSec: ptr(float64(ops[i]) / spent[i].Seconds()),
			Note:      fmt.Sprintf("%d goroutines, distinct keys", sz.workers)}
		errs[i].fill(&out[i])
	}
	return out
}

// wake measures hand-off: a waiter is blocked in the library's own waiting
// acquire; the holder releases after a random delay (so that polling
// waiters are caught at every phase of their backoff); the sample is the
// time from the holder's Release returning to the waiter's acquire
// returning.
func wake(ctx context.Context, run *runner, l locker) Result {
	res := Result{Lock: l.name, Scenario: "wake"}
	if l.wait == nil {
		res.Skipped = true
		res.Note = "no waiting acquire in this lock"
		return res
	}
	sz := run.sizes
	key := run.key(l, "wake", 0)
	var samples []time.Duration
	var errs errorLog
	for s := range sz.wakeSamples {
		if s%10 == 0 {
			run.progress("wake", l.name, s, sz.wakeSamples)
		}
		d, err := wakeOnce(ctx, l, key, sz.wakeBlock)
		if err != nil {
			errs.add(err)
			continue
		}
		samples = append(samples, d)
	}
	res.setLatency(samples)
	errs.fill(&res)
	res.Note = fmt.Sprintf("waiter blocked %v-%v before the release", sz.wakeBlock[0], sz.wakeBlock[1])
	return res
}

func wakeOnce(ctx context.Context, l locker, key string, block [2]time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rel, err := l.try(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("holder: %w", err)
	}
	type got struct {
		at  time.Time
		err error
	}
	done := make(chan got, 1)
	go func() {
		wrel, err := l.wait(ctx, key)
		at := time.Now()
		if err == nil {
			err = wrel(ctx)
		}
		done <- got{at, err}
	}()
	time.Sleep(block[0] + rand.N(block[1]-block[0]+1))
	if err := rel(ctx); err != nil {
		<-done
		return 0, fmt.Errorf("holder release: %w", err)
	}
	released := time.Now()
	g := <-done
	if g.err != nil {
		return 0, fmt.Errorf("waiter: %w", g.err)
	}
	// The waiter can return a hair before the holder's Release does (its
	// wake-up and the release reply leave the server together); count that
	// as zero.
	return max(0, g.at.Sub(released)), nil
}

// hotkey runs workers on one key, each holding the lock for hold per
// critical section, using the library's waiting acquire; it reports
// critical sections per second and each worker's share.
func hotkey(ctx context.Context, run *runner, l locker) Result {
	res := Result{Lock: l.name, Scenario: "hotkey"}
	if l.wait == nil {
		res.Skipped = true
		res.Note = "no waiting acquire in this lock"
		return res
	}
	sz := run.sizes
	run.progress("hotkey", l.name, 0, 1)
	key := run.key(l, "hot", 0)
	counts := make([]int, sz.hotWorkers)
	var errs errorLog
	deadline := time.Now().Add(sz.hotDuration)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// over is whether the run's end caused an error: a dial can time out on
	// the deadline a moment before wctx says it is done.
	over := func() bool { return wctx.Err() != nil || time.Until(deadline) < time.Millisecond }
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range sz.hotWorkers {
		wg.Go(func() {
			for wctx.Err() == nil {
				rel, err := l.wait(wctx, key)
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
				if err := rel(rctx); err != nil {
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
	res.OpsPerSec = ptr(float64(total) / elapsed.Seconds())
	if total > 0 {
		res.MinShare = ptr(float64(lo) / float64(total))
		res.MaxShare = ptr(float64(hi) / float64(total))
	}
	res.Note = fmt.Sprintf("%d workers, one key, %v held; fair share %.3f", sz.hotWorkers, sz.hotHold, 1/float64(sz.hotWorkers))
	return res
}
