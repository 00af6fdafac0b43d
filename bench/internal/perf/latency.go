package perf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/bench/internal/locks"
	"github.com/fencelock/fencelock/bench/internal/report"
)

// opTimeout bounds each acquire+release, so a stuck server fails the run
// instead of hanging it.
const opTimeout = 5 * time.Second

// acquireRelease is one uncontended acquire (a single attempt) and release.
func acquireRelease(ctx context.Context, l *locks.Lock, key string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	h, err := l.Try(ctx, key)
	if err != nil {
		return err
	}
	return h.Release(ctx)
}

// uncontended measures sequential acquire+release latency on distinct keys.
// The locks take turns in batches, round after round, so that a change in
// the machine's load falls on all of them alike.
func uncontended(ctx context.Context, run *runner, ls []*locks.Lock) []report.Result {
	sz := run.sizes
	samples := make([][]time.Duration, len(ls))
	errs := make([]errorLog, len(ls))
	for i, l := range ls { // warm up: connections, script cache
		for j := range 50 {
			if err := acquireRelease(ctx, l, run.key(l, "warm", j)); err != nil {
				errs[i].add(err)
			}
		}
	}
	for round := range sz.rounds {
		for i, l := range ls {
			run.step("uncontended", l.Name, round+1, sz.rounds)
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
	out := make([]report.Result, len(ls))
	for i, l := range ls {
		out[i] = report.Result{Lock: l.Name, Scenario: "uncontended"}
		errs[i].fill(&out[i])
		setLatency(&out[i], samples[i])
	}
	return out
}

// parallel measures acquire+release throughput with many goroutines, each
// on its own key. Locks take turns in slices, as in uncontended.
func parallel(ctx context.Context, run *runner, ls []*locks.Lock) []report.Result {
	sz := run.sizes
	ops := make([]int64, len(ls))
	errs := make([]errorLog, len(ls))
	spent := make([]time.Duration, len(ls))
	for round := range sz.rounds {
		for i, l := range ls {
			run.step("parallel", l.Name, round+1, sz.rounds)
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
	out := make([]report.Result, len(ls))
	for i, l := range ls {
		out[i] = report.Result{Lock: l.Name, Scenario: "parallel", Samples: int(ops[i]),
			OpsPerSec: report.Ptr(float64(ops[i]) / spent[i].Seconds()),
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
func wake(ctx context.Context, run *runner, l *locks.Lock) report.Result {
	if !l.CanWait() {
		return skipped(l.Name, "wake")
	}
	res := report.Result{Lock: l.Name, Scenario: "wake"}
	sz := run.sizes
	key := run.key(l, "wake", 0)
	var samples []time.Duration
	var errs errorLog
	for s := range sz.wakeSamples {
		if s%10 == 0 {
			run.step("wake", l.Name, s, sz.wakeSamples)
		}
		d, err := wakeOnce(ctx, l, key, sz.wakeBlock)
		if err != nil {
			errs.add(err)
			continue
		}
		samples = append(samples, d)
	}
	setLatency(&res, samples)
	errs.fill(&res)
	res.Note = fmt.Sprintf("waiter blocked %v-%v before the release", sz.wakeBlock[0], sz.wakeBlock[1])
	return res
}

func wakeOnce(ctx context.Context, l *locks.Lock, key string, block [2]time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	held, err := l.Try(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("holder: %w", err)
	}
	type got struct {
		at  time.Time
		err error
	}
	done := make(chan got, 1)
	go func() {
		h, err := l.Wait(ctx, key)
		at := time.Now()
		if err == nil {
			err = h.Release(ctx)
		}
		done <- got{at, err}
	}()
	time.Sleep(block[0] + rand.N(block[1]-block[0]+1))
	if err := held.Release(ctx); err != nil {
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
