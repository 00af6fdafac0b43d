package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// pubsubConns counts the pub/sub connections the server behind rdb sees.
func pubsubConns(ctx context.Context, rdb redis.UniversalClient) (int, error) {
	list, err := rdb.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n, nil
}

// burstTTL is the ttl of the burst's locks: short enough that a lock
// whose release failed on a loaded node is free again within the waiters'
// context, long enough that a waiter on a machine loaded far beyond its
// cores (the whole suite on 2 cores) does not take a ttl of node timeouts
// for an unavailable service (see Client.Acquire).
const burstTTL = 15 * time.Second

// burstResult is what one waiter burst saw.
type burstResult struct {
	acquired, failed int
	firstErr         error
	acquireErr       error         // the first waiter's Acquire that failed
	releaseErrs      int           // holders' releases that failed on some node
	maxConns         []int         // per node: the most pub/sub connections seen
	handoffs         time.Duration // from the holders' release to the last waiter's lock
}

// burst holds keys locks, starts waiters Acquire calls on them at once
// (waiters/keys per lock), waits until every lock's release channel has a
// subscriber on every node, releases the locks and lets the waiters take
// them one after another (each releases at once). Meanwhile it samples
// CLIENT LIST on every node for pub/sub connections.
func burst(ctx context.Context, c *lease.Client, rdbs []redis.UniversalClient, prefix string, keys, waiters int) (burstResult, error) {
	names := make([]string, keys)
	var holders []*lease.Lease
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		// Acquire, not TryAcquire: on a loaded machine a holder's first
		// attempt may miss the node timeout too.
		h, err := c.Acquire(ctx, names[i], burstTTL)
		if err != nil {
			return burstResult{}, fmt.Errorf("holder %s: %w", names[i], err)
		}
		holders = append(holders, h)
	}

	res := burstResult{maxConns: make([]int, len(rdbs))}
	var mu sync.Mutex
	var acquired, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			l, err := c.Acquire(ctx, names[i%keys], burstTTL)
			if err == nil {
				acquired.Add(1)
				err = l.Release(ctx)
			} else {
				failed.Add(1)
				mu.Lock()
				if res.acquireErr == nil {
					res.acquireErr = err
				}
				mu.Unlock()
			}
			if err != nil {
				mu.Lock()
				if res.firstErr == nil {
					res.firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			for i, rdb := range rdbs {
				if n, err := pubsubConns(ctx, rdb); err == nil {
					mu.Lock()
					res.maxConns[i] = max(res.maxConns[i], n)
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	// Release once every lock has a listening waiter on every node (or the
	// waiters all ended), so that the releases have someone to wake.
	for ctx.Err() == nil && acquired.Load()+failed.Load() == 0 && !allSubscribed(ctx, rdbs, names) {
		time.Sleep(2 * time.Millisecond)
	}
	start := time.Now()
	for _, h := range holders {
		// A release that timed out on some nodes leaves the lock there to
		// its ttl; the waiters still get it then.
		if err := h.Release(ctx); err != nil {
			res.releaseErrs++
		}
	}
	wg.Wait()
	res.handoffs = time.Since(start)
	close(stop)
	<-sampled
	res.acquired, res.failed = int(acquired.Load()), int(failed.Load())
	return res, nil
}

// allSubscribed reports whether every lock's release channel has a
// subscriber on every node.
func allSubscribed(ctx context.Context, rdbs []redis.UniversalClient, names []string) bool {
	chans := make([]string, len(names))
	for i, n := range names {
		chans[i] = releaseChannel(n)
	}
	for _, rdb := range rdbs {
		m, err := rdb.PubSubNumSub(ctx, chans...).Result()
		if err != nil {
			return false
		}
		for _, ch := range chans {
			if m[ch] == 0 {
				return false
			}
		}
	}
	return true
}

// releaseChannel is lock n's release channel under the default prefix.
func releaseChannel(n string) string { return lease.DefaultPrefix + "{" + n + "}:release" }

// TestWaitersShareConnections: a thousand waiters of one client on a
// hundred locks share one pub/sub connection per node (CLIENT LIST counts
// at most two, the bound, on every node, sampled throughout), every
// release channel has exactly one subscriber (that connection) per node,
// and every waiter gets its lock.
func TestWaitersShareConnections(t *testing.T) {
	_, rdbs := ownNodes(t, 3)
	ctx := ctxFor(t, 3*time.Minute)
	// The first attempts of a thousand waiters reach the nodes at once: on
	// a loaded two-core machine that takes more than the default node
	// timeout, and at times more than 1s (see BenchmarkWaitersBurst). This
	// test is about connections, not timeouts.
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(10*time.Second))
	const keys, waiters = 100, 1000
	prefix := name(t)

	res, err := burst(ctx, c, rdbs, prefix, keys, waiters)
	require.NoError(t, err)
	assert.Equal(t, waiters, res.acquired, "every waiter got its lock; first error: %v", res.firstErr)
	for i, n := range res.maxConns {
		assert.LessOrEqual(t, n, 2, "node %d: pub/sub connections", i)
		assert.Positive(t, n, "node %d: the waiters listened", i)
	}
	t.Logf("%d waiters on %d locks: %d acquired in %v, pub/sub connections per node at most %v",
		waiters, keys, res.acquired, res.handoffs.Round(time.Millisecond), res.maxConns)
}

// TestWaitersOneSubscriberPerChannel: several waiters of one client on one
// lock are one subscriber of its channel on each node, and a release wakes
// them one at a time until all got the lock (their backoff is an hour and
// the holder's ttl a minute, so only the release messages can wake them).
func TestWaitersOneSubscriberPerChannel(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, sharedRDB[:3], lease.WithBackoff(time.Hour, time.Hour))
	n := name(t)
	holder, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	const waiters = 8
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			l, err := c.Acquire(ctx, n, time.Minute)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
	}
	require.Eventually(t, func() bool {
		for _, rdb := range sharedRDB[:3] {
			m, err := rdb.PubSubNumSub(ctx, releaseChannel(n)).Result()
			if err != nil || m[releaseChannel(n)] != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 2*time.Millisecond, "one subscriber per node")
	require.NoError(t, holder.Release(ctx))
	for range waiters {
		require.NoError(t, <-done)
	}
}

// BenchmarkWaitersBurst is a waiters burst: 1,000 waiters of one client on
// 100 locks over 3 nodes, released once every lock has listeners, with the
// default node timeout (50ms) and with 1s. It reports how many waiters
// failed, the most pub/sub connections a node saw, and the time from the
// holders' release until the last waiter had its lock.
func BenchmarkWaitersBurst(b *testing.B) {
	const keys, waiters = 100, 1000
	rdbs := sharedRDB[:3]
	for _, timeout := range []time.Duration{redlock.DefaultNodeTimeout, time.Second} {
		b.Run(fmt.Sprintf("nodeTimeout=%v", timeout), func(b *testing.B) {
			c, err := redlock.New(rdbs, redlock.WithNodeTimeout(timeout))
			if err != nil {
				b.Fatal(err)
			}
			var failed, conns, releaseErrs int
			var took time.Duration
			for i := 0; b.Loop(); i++ {
				ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
				prefix := fmt.Sprintf("bench-burst-%v-%d-%d", timeout, time.Now().UnixNano(), i)
				res, err := burst(ctx, c, rdbs, prefix, keys, waiters)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				failed += res.failed
				releaseErrs += res.releaseErrs
				took += res.handoffs
				for _, n := range res.maxConns {
					conns = max(conns, n)
				}
				if res.firstErr != nil {
					b.Logf("run %d: %d failed, first error: %v", i, res.failed, res.firstErr)
				}
			}
			b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
			b.ReportMetric(float64(releaseErrs)/float64(b.N), "holder-release-errs/op")
			b.ReportMetric(float64(conns), "max-pubsub-conns/node")
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "drain-ms/op")
		})
	}
}

// TestWaitersBurstDefaultNodeTimeout: a thousand waiters of one client on
// a hundred locks, with the default node timeout and a generous context
// (60s), all get their lock, in one burst, on a busy machine too. Their
// first attempts reach every node at once: batched into a few pipelines
// per node, they are mostly answered within the node timeout, and an
// attempt that missed it (the client's 4,000 goroutines waiting for a CPU,
// a GC cycle) is retried after the backoff, not taken for an unavailable
// lock service. (Before, such a miss made Acquire return at once: 0 of
// 1,000 without batching, and on a loaded machine far fewer than 1,000
// with it.)
func TestWaitersBurstDefaultNodeTimeout(t *testing.T) {
	_, rdbs := ownNodes(t, 3)
	ctx := ctxFor(t, time.Minute)
	c, err := redlock.New(rdbs) // the default node timeout, not newLocker's
	require.NoError(t, err)
	require.Equal(t, 50*time.Millisecond, redlock.DefaultNodeTimeout)
	const keys, waiters = 100, 1000
	res, err := burst(ctx, c, rdbs, name(t), keys, waiters)
	require.NoError(t, err)
	t.Logf("%d waiters on %d locks: %d acquired in %v; first error: %v",
		waiters, keys, res.acquired, res.handoffs.Round(time.Millisecond), res.firstErr)
	assert.Equal(t, waiters, res.acquired, "every waiter got its lock; first failed Acquire: %v", res.acquireErr)
}
