package lease_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/luascript"
	"github.com/fencelock/fencelock/lease"
)

// cadScript is the raw floor's release: compare holder, then delete (run
// by the hash SCRIPT LOAD gives: no SHA-1 here, for the FIPS run).
var cadScript = luascript.New(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`, "")

// rawAcquireRelease is the floor a lock cannot go below with the same client:
// SET NX PX, then compare-and-delete.
func rawAcquireRelease(ctx context.Context, rdb redis.UniversalClient, key string) error {
	holder := uuid.NewString()
	ok, err := rdb.SetNX(ctx, key, holder, time.Minute).Result()
	if err != nil || !ok {
		return fmt.Errorf("raw acquire: %v %w", ok, err)
	}
	return cadScript.Run(ctx, rdb, []string{key}, holder).Err()
}

func leaseAcquireRelease(ctx context.Context, c *lease.Client, key string) error {
	l, err := c.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

// BenchmarkAcquireRelease measures one acquire+release, sequential, on
// distinct keys: the fencelock lease against the raw floor, same server and
// client, in the same run. The "paired" case alternates the two and reports
// the ratio, which is what to compare on a noisy machine.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	c, err := lease.New(shared)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
	}
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := rawAcquireRelease(ctx, shared, "raw:"+keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lease", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := leaseAcquireRelease(ctx, c, keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	unbatched, err := lease.New(shared)
	if err != nil {
		b.Fatal(err)
	}
	lease.Unbatched(unbatched)
	b.Run("paired", func(b *testing.B) {
		// A lone call goes out directly through the batching transport
		// too: "unbatched" shows what the transport's bookkeeping costs.
		var tRaw, tLease, tDirect time.Duration
		for i := 0; b.Loop(); i++ {
			k := keys[i%len(keys)]
			t0 := time.Now()
			if err := rawAcquireRelease(ctx, shared, "raw:"+k); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := leaseAcquireRelease(ctx, c, k); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := leaseAcquireRelease(ctx, unbatched, "unbatched:"+k); err != nil {
				b.Fatal(err)
			}
			tRaw += t1.Sub(t0)
			tLease += t2.Sub(t1)
			tDirect += time.Since(t2)
		}
		b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "raw-ns/op")
		b.ReportMetric(float64(tLease.Nanoseconds())/float64(b.N), "lease-ns/op")
		b.ReportMetric(float64(tDirect.Nanoseconds())/float64(b.N), "unbatched-ns/op")
		b.ReportMetric(float64(tLease)/float64(tRaw), "lease/raw")
		b.ReportMetric(float64(tLease)/float64(tDirect), "lease/unbatched")
	})
}

// BenchmarkParallel is the bench's parallel scenario: 64 goroutines, each
// on keys of its own, acquire and release as fast as they can. Each round
// of the "paired" case runs raw, the lease (batched script calls, the
// default) and the lease unbatched for the same time slice, interleaved,
// and reports each one's ops/s and the ratios, which is what to compare on
// a noisy machine.
func BenchmarkParallel(b *testing.B) {
	const goroutines = 64
	const slice = 200 * time.Millisecond
	batched, err := lease.New(shared)
	if err != nil {
		b.Fatal(err)
	}
	defer batched.Close(context.Background())
	direct, err := lease.New(shared)
	if err != nil {
		b.Fatal(err)
	}
	lease.Unbatched(direct)
	runs := map[string]func(ctx context.Context, key string) error{
		"raw": func(ctx context.Context, key string) error {
			return rawAcquireRelease(ctx, shared, "raw:"+key)
		},
		"lease": func(ctx context.Context, key string) error { return leaseAcquireRelease(ctx, batched, key) },
		"unbatched": func(ctx context.Context, key string) error {
			return leaseAcquireRelease(ctx, direct, "unbatched:"+key)
		},
	}
	order := []string{"raw", "lease", "unbatched"}
	// slice runs f on 64 goroutines for d and returns the ops done.
	run := func(f func(context.Context, string) error, round int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stop := time.Now().Add(slice)
		counts := make([]int, goroutines)
		errs := make(chan error, goroutines)
		for g := range goroutines {
			go func() {
				for i := 0; time.Now().Before(stop); i++ {
					if err := f(ctx, fmt.Sprintf("par:%d:%d:%d", round, g, i%64)); err != nil {
						errs <- err
						return
					}
					counts[g]++
				}
				errs <- nil
			}()
		}
		var first error
		for range goroutines {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		n := 0
		for _, c := range counts {
			n += c
		}
		return n, first
	}
	b.Run("paired", func(b *testing.B) {
		ops := map[string]int{}
		ratio := map[string][]float64{}
		for i := 0; b.Loop(); i++ {
			round := map[string]int{}
			for _, k := range order {
				n, err := run(runs[k], i)
				if err != nil {
					b.Fatal(k, err)
				}
				round[k] = n
				ops[k] += n
			}
			ratio["lease/raw"] = append(ratio["lease/raw"], float64(round["lease"])/float64(round["raw"]))
			ratio["lease/unbatched"] = append(ratio["lease/unbatched"], float64(round["lease"])/float64(round["unbatched"]))
		}
		secs := slice.Seconds() * float64(b.N)
		for _, k := range order {
			b.ReportMetric(float64(ops[k])/secs, k+"-ops/s")
		}
		for k, r := range ratio {
			slices.Sort(r)
			b.ReportMetric(r[len(r)/2], k)
		}
	})
}
