package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// benchKeys are the lock names the benchmarks cycle through.
var benchKeys = func() []string {
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
	}
	return keys
}()

// benchTimeout keeps a load spike on a shared machine from failing a
// benchmark; the node timeout does not change the latency of a success.
var benchTimeout = redlock.WithNodeTimeout(time.Second)

// acquireRelease is one sequential acquire+release; it returns how long the
// acquire took.
type acquireRelease func(ctx context.Context, key string) (time.Duration, error)

func scriptOnce(rdb redis.UniversalClient) acquireRelease {
	return func(ctx context.Context, key string) (time.Duration, error) {
		k := protocol.KeysFor("bench-script:", key)
		holder := uuid.NewString()
		start := time.Now()
		res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: holder, TTL: time.Minute})
		took := time.Since(start)
		if err != nil || !res.Got() {
			return took, fmt.Errorf("script acquire: %v %w", res, err)
		}
		_, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: holder})
		return took, err
	}
}

func leaseOnce(c *lease.Client) acquireRelease {
	return func(ctx context.Context, key string) (time.Duration, error) {
		start := time.Now()
		l, err := c.TryAcquire(ctx, key, time.Minute)
		took := time.Since(start)
		if err != nil {
			return took, err
		}
		return took, l.Release(ctx)
	}
}

func redlockOnce(c *lease.Client) acquireRelease {
	return func(ctx context.Context, key string) (time.Duration, error) {
		start := time.Now()
		l, err := c.TryAcquire(ctx, key, time.Minute)
		took := time.Since(start)
		if err != nil {
			return took, err
		}
		return took, l.Release(ctx)
	}
}

// BenchmarkAcquireRelease measures one sequential acquire+release on the
// single-node script and lease and on redlock over 3 and 5 nodes, with
// quorum fencing off and on, in the same run. acquire-ns/op is the acquire
// alone; the lock latency a caller waits for before working.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	single, err := lease.New(sharedRDB[0], lease.WithPrefix("bench-lease:"))
	if err != nil {
		b.Fatal(err)
	}
	rl := func(n int, fenced bool) acquireRelease {
		// A prefix per case: a 3-node case must not leave nodes 0-2 ahead
		// of the others, which a 5-node fenced case would have to write back.
		prefix := fmt.Sprintf("bench-redlock-%d-%v:", n, fenced)
		c, err := redlock.New(sharedRDB[:n], lease.WithPrefix(prefix), redlock.WithQuorumFencing(fenced), benchTimeout)
		if err != nil {
			b.Fatal(err)
		}
		return redlockOnce(c)
	}
	for _, bc := range []struct {
		name string
		f    acquireRelease
	}{
		{"script/1node", scriptOnce(sharedRDB[0])},
		{"lease/1node", leaseOnce(single)},
		{"redlock/3nodes", rl(3, false)},
		{"redlock/5nodes", rl(5, false)},
		{"redlock/3nodes/fenced", rl(3, true)},
		{"redlock/5nodes/fenced", rl(5, true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var acq time.Duration
			for i := 0; b.Loop(); i++ {
				took, err := bc.f(ctx, benchKeys[i%len(benchKeys)])
				if err != nil {
					b.Fatal(err)
				}
				acq += took
			}
			b.ReportMetric(float64(acq.Nanoseconds())/float64(b.N), "acquire-ns/op")
		})
	}
}

// BenchmarkPaired alternates a single-node lease and 5-node redlock
// acquire+release, so both see the same machine load, and reports the
// ratio of their acquire latencies: the figure to compare on a noisy
// machine (the target is at most 1.5).
func BenchmarkPaired(b *testing.B) {
	single, err := lease.New(sharedRDB[0], lease.WithPrefix("bench-lease:"))
	if err != nil {
		b.Fatal(err)
	}
	pairedRuns(b, single, sharedRDB, "bench-paired")
}

// BenchmarkPingFloor is the floor under BenchmarkPaired's ratio on this
// machine: one PING against five PINGs sent at once, alternated. On loopback
// with few cores, the five servers and the client compete for the same
// cores, so even a bare parallel round trip to five servers costs several
// times one; redlock cannot beat that ratio here.
func BenchmarkPingFloor(b *testing.B) {
	ctx := context.Background()
	var t1, t5 time.Duration
	done := make(chan error, len(sharedRDB))
	for b.Loop() {
		start := time.Now()
		if err := sharedRDB[0].Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		for _, rdb := range sharedRDB {
			go func() { done <- rdb.Ping(ctx).Err() }()
		}
		for range sharedRDB {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		t1 += mid.Sub(start)
		t5 += time.Since(mid)
	}
	b.ReportMetric(float64(t1.Nanoseconds())/float64(b.N), "1node-ns/op")
	b.ReportMetric(float64(t5.Nanoseconds())/float64(b.N), "5node-ns/op")
	b.ReportMetric(float64(t5)/float64(t1), "ratio")
}

// BenchmarkSimulatedRTT is BenchmarkPaired behind a delay proxy per node, so
// the network, not the shared cores, dominates, as when the nodes are on
// other machines: the ratio then shows that the nodes are asked in parallel.
// In series, 5 nodes would take about 5 round trips. The proxy holds each
// chunk 1ms (Go's timers make it a little more), so a round trip is ≈2-2.5ms.
func BenchmarkSimulatedRTT(b *testing.B) {
	const oneWay = time.Millisecond
	var nodes []redis.UniversalClient
	for _, r := range shared {
		p := newDelayProxy(b, r.Addr(), oneWay)
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		b.Cleanup(func() { c.Close() })
		nodes = append(nodes, c)
	}
	single, err := lease.New(nodes[0], lease.WithPrefix("bench-rtt-lease:"))
	if err != nil {
		b.Fatal(err)
	}
	pairedRuns(b, single, nodes, "bench-rtt")
}

// pairedRuns alternates one single-node lease acquire+release with one
// redlock acquire+release over nodes, with quorum fencing off and on, and
// reports the ratio of their acquire latencies.
func pairedRuns(b *testing.B, single *lease.Client, nodes []redis.UniversalClient, prefix string) {
	ctx := context.Background()
	for _, fenced := range []bool{false, true} {
		c, err := redlock.New(nodes, lease.WithPrefix(fmt.Sprintf("%s-%v:", prefix, fenced)), redlock.WithQuorumFencing(fenced), benchTimeout)
		if err != nil {
			b.Fatal(err)
		}
		one, five := leaseOnce(single), redlockOnce(c)
		b.Run(fmt.Sprintf("5v1/fenced=%v", fenced), func(b *testing.B) {
			var t1, t5 time.Duration
			for i := 0; b.Loop(); i++ {
				k := benchKeys[i%len(benchKeys)]
				d1, err := one(ctx, k)
				if err != nil {
					b.Fatal(err)
				}
				d5, err := five(ctx, k)
				if err != nil {
					b.Fatal(err)
				}
				t1 += d1
				t5 += d5
			}
			b.ReportMetric(float64(t1.Nanoseconds())/float64(b.N), "1node-acquire-ns/op")
			b.ReportMetric(float64(t5.Nanoseconds())/float64(b.N), "5node-acquire-ns/op")
			b.ReportMetric(float64(t5)/float64(t1), "ratio")
		})
	}
}
