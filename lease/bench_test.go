package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
)

// cadScript is the raw floor's release: compare holder, then delete.
var cadScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

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
	b.Run("paired", func(b *testing.B) {
		var tRaw, tLease time.Duration
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
			tRaw += t1.Sub(t0)
			tLease += time.Since(t1)
		}
		b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), "raw-ns/op")
		b.ReportMetric(float64(tLease.Nanoseconds())/float64(b.N), "lease-ns/op")
		b.ReportMetric(float64(tLease)/float64(tRaw), "lease/raw")
	})
}
