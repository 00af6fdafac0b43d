package lease_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/lease"
)

// BenchmarkHotKey is the bench's hotkey scenario on the lease alone: 8
// goroutines on one lock, each holding it for 1ms per critical section
// (b.N sections in all). Besides the critical sections per second and
// their share of the ceiling that time.Sleep(1ms) allows (measured after
// the run), it reports the handoff gap, from a holder's Release call to the
// next holder's Acquire returning: what the lock adds to each section. A
// fair handoff is the release script and one message, so its median gap is
// about the release call's own round trip (release-p50-µs). held-mean-µs is
// the time.Sleep(1ms) as the workers saw it: longer than alone, because Go
// waits for timers in epoll with millisecond timeouts, and a reply that
// wakes the process during a sleep (the last holder's next try) makes it
// wait a whole millisecond from then.
func BenchmarkHotKey(b *testing.B) {
	for _, fair := range []bool{true, false} {
		name := "fair"
		if !fair {
			name = "unfair"
		}
		b.Run(name, func(b *testing.B) {
			c, err := lease.New(shared, lease.WithFair(fair))
			if err != nil {
				b.Fatal(err)
			}
			const workers, hold = 8, time.Millisecond
			ctx := context.Background()
			key := "hotkey/" + b.Name()
			var (
				mu        sync.Mutex
				released  time.Time // the last holder's Release call
				gaps, rel []time.Duration
				holds     time.Duration
				n         int
			)
			b.ResetTimer()
			t0 := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for {
						l, err := c.Acquire(ctx, key, 10*time.Second)
						if err != nil {
							b.Error(err)
							return
						}
						got := time.Now()
						mu.Lock()
						done := n >= b.N
						n++
						if !released.IsZero() {
							gaps = append(gaps, got.Sub(released))
						}
						mu.Unlock()
						time.Sleep(hold)
						r0 := time.Now()
						mu.Lock()
						released = r0
						holds += r0.Sub(got)
						mu.Unlock()
						if err := l.Release(ctx); err != nil {
							b.Error(err)
						}
						mu.Lock()
						rel = append(rel, time.Since(r0))
						mu.Unlock()
						if done {
							return
						}
					}
				})
			}
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			s0 := time.Now()
			for range 200 {
				time.Sleep(hold)
			}
			sleep := time.Since(s0) / 200
			cs := float64(n) / el.Seconds()
			b.ReportMetric(cs, "cs/s")
			b.ReportMetric(cs*sleep.Seconds(), "of-ceiling")
			if len(gaps) == 0 {
				return
			}
			slices.Sort(gaps)
			slices.Sort(rel)
			var sum time.Duration
			for _, g := range gaps {
				sum += g
			}
			b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "gap-p50-µs")
			b.ReportMetric(float64(sum.Microseconds())/float64(len(gaps)), "gap-mean-µs")
			b.ReportMetric(float64(rel[len(rel)/2].Microseconds()), "release-p50-µs")
			b.ReportMetric(float64(holds.Microseconds())/float64(n), "held-mean-µs")
		})
	}
}
