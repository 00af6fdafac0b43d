package perf

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

func names(ls []*locks.Lock) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name
	}
	return out
}

// uncontended measures sequential acquire+release latency on distinct keys,
// interleaved: in each round every lock runs a batch, in turn. A round's
// figure is the p50 of its batch; p50 and p99 are over every sample. The
// results are scenario's (uncontended, or the semaphores' sem_uncontended).
func uncontended(ctx context.Context, run *runner, ls []*locks.Lock, scenario string) []report.Result {
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
	figs := interleave(ctx, run, scenario, sz.rounds, names(ls), func(_, i int) float64 {
		l := ls[i]
		var batch []time.Duration
		for j := range sz.batch {
			t0 := time.Now()
			err := acquireRelease(ctx, l, run.key(l, "u", j))
			d := time.Since(t0)
			if err != nil {
				errs[i].add(err)
				continue
			}
			batch = append(batch, d)
		}
		samples[i] = append(samples[i], batch...)
		return p50Of(batch)
	})
	out := make([]report.Result, len(ls))
	for i, l := range ls {
		out[i] = report.Result{Lock: l.Name, Scenario: scenario, PerRound: figs[i],
			Note: fmt.Sprintf("sequential, distinct keys; %d rounds × %d per lock, interleaved", sz.rounds, sz.batch)}
		errs[i].fill(&out[i])
		setLatency(&out[i], samples[i])
	}
	pairUp(out, p50, true)
	return out
}

// p50Of is the p50 of samples in µs, or NaN when there is none.
func p50Of(samples []time.Duration) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return us(percentile(s, 0.50))
}

// parallel measures acquire+release throughput with many goroutines, each
// on its own key, interleaved: in each round every lock runs a slice.
func parallel(ctx context.Context, run *runner, ls []*locks.Lock) []report.Result {
	sz := run.sizes
	count := make([]int64, len(ls))
	errs := make([]errorLog, len(ls))
	spent := make([]time.Duration, len(ls))
	figs := interleave(ctx, run, "parallel", sz.parRounds, names(ls), func(_, i int) float64 {
		l := ls[i]
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
		d := time.Since(t0)
		spent[i] += d
		count[i] += n.Load()
		return float64(n.Load()) / d.Seconds()
	})
	out := make([]report.Result, len(ls))
	for i, l := range ls {
		out[i] = report.Result{Lock: l.Name, Scenario: "parallel", Workers: sz.workers, Samples: int(count[i]), PerRound: figs[i],
			Note: fmt.Sprintf("%d goroutines, distinct keys; %d rounds × %v per lock, interleaved", sz.workers, sz.parRounds, sz.slice)}
		if spent[i] > 0 {
			out[i].OpsPerSec = report.Ptr(float64(count[i]) / spent[i].Seconds())
		}
		errs[i].fill(&out[i])
	}
	pairUp(out, ops, false)
	return out
}

// waiting returns the locks of ls with a waiting acquire, and the results
// of scenario for the others (skipped), in the order of ls.
func waiting(ls []*locks.Lock, scenario string) (can []*locks.Lock, idx []int, out []report.Result) {
	out = make([]report.Result, len(ls))
	for i, l := range ls {
		if l.CanWait() {
			can, idx = append(can, l), append(idx, i)
			continue
		}
		out[i] = skipped(l.Name, scenario)
	}
	return can, idx, out
}

// wake measures hand-off, interleaved: in each round every lock with a
// waiting acquire takes wakeSamples samples in turn. A sample: a waiter is
// blocked in the library's own waiting acquire; the holder releases after
// a random delay (so that polling waiters are caught at every phase of
// their backoff); the sample is the time from the holder's Release
// returning to the waiter's acquire returning, 0 when the waiter had the
// lock before the Release returned (counted in BeforeRelease).
func wake(ctx context.Context, run *runner, ls []*locks.Lock) []report.Result {
	sz := run.sizes
	can, idx, out := waiting(ls, "wake")
	samples := make([][]time.Duration, len(can))
	before := make([]int, len(can))
	errs := make([]errorLog, len(can))
	figs := interleave(ctx, run, "wake", sz.wakeRounds, names(can), func(_, i int) float64 {
		l := can[i]
		var round []time.Duration
		for range sz.wakeSamples {
			d, err := wakeOnce(ctx, l, run.key(l, "wake", 0), sz.wakeBlock)
			if err != nil {
				errs[i].add(err)
				continue
			}
			if d < 0 {
				before[i]++
			}
			round = append(round, max(0, d))
		}
		samples[i] = append(samples[i], round...)
		return p50Of(round)
	})
	for i, l := range can {
		r := report.Result{Lock: l.Name, Scenario: "wake", PerRound: figs[i], BeforeRelease: before[i],
			Note: fmt.Sprintf("waiter blocked %v-%v before the release; %d rounds × %d per lock, interleaved",
				sz.wakeBlock[0], sz.wakeBlock[1], sz.wakeRounds, sz.wakeSamples)}
		setLatency(&r, samples[i])
		errs[i].fill(&r)
		out[idx[i]] = r
	}
	pairUp(out, p50, true)
	return out
}

// wakeOnce is one wake sample: from the holder's Release returning to the
// waiter's acquire returning, negative when the waiter returned first (its
// wake-up and the release reply can leave the server together).
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
	return g.at.Sub(released), nil
}
