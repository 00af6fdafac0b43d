package lease_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// queued returns how many waiters are in lock n's fair queue.
func queued(t *testing.T, rdb redis.UniversalClient, n string) int64 {
	t.Helper()
	c, err := rdb.ZCard(t.Context(), protocol.KeysFor("fencelock:", n).Queue).Result()
	require.NoError(t, err)
	return c
}

// waitQueued waits until lock n's queue holds want waiters.
func waitQueued(t *testing.T, rdb redis.UniversalClient, n string, want int64) {
	t.Helper()
	require.Eventually(t, func() bool { return queued(t, rdb, n) == want }, 10*time.Second, 2*time.Millisecond,
		"waiting for %d queued waiters", want)
}

// TestFairHandoffOrder: 64 waiters that queue one after another get the
// lock in that order, each from the previous one's release, with tokens
// strictly increasing in handoff order.
func TestFairHandoffOrder(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	first, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)

	const waiters = 64
	type got struct {
		i   int
		seq uint64
	}
	order := make(chan got, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			l, err := c.Acquire(ctx, n, time.Minute)
			if !assert.NoError(t, err) {
				return
			}
			order <- got{i, l.Token().Seq}
			assert.NoError(t, l.Release(ctx))
		})
		waitQueued(t, shared, n, int64(i+1)) // the next one arrives after this one queued
	}
	require.NoError(t, first.Release(ctx))
	wg.Wait()
	close(order)
	prev := first.Token().Seq
	i := 0
	for g := range order {
		assert.Equal(t, i, g.i, "waiter %d got the lock in turn %d", g.i, i)
		assert.Greater(t, g.seq, prev, "tokens grow in handoff order")
		prev = g.seq
		i++
	}
	assert.Equal(t, waiters, i)
	assert.Zero(t, queued(t, shared, n))
}

// TestFairTryDoesNotJumpTheQueue: while a waiter is queued, TryAcquire
// fails even in the moment the lock is free, and the waiter gets it.
func TestFairTryDoesNotJumpTheQueue(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	holder, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := c.Acquire(ctx, n, time.Minute)
		assert.NoError(t, err)
		got <- l
	}()
	waitQueued(t, shared, n, 1)
	// Free the lock without a handoff (as if it expired): the queue still
	// reserves it for the waiter.
	require.NoError(t, shared.Del(ctx, protocol.KeysFor("fencelock:", n).Lock).Err())
	_, err = c.TryAcquire(ctx, n, time.Minute)
	assert.ErrorIs(t, err, lease.ErrNotAcquired, "a try caller does not jump the queue")
	var held *lease.HeldError
	if assert.ErrorAs(t, err, &held) && held.Remaining > 0 {
		// The waiter's own try came first and took it: still not the try
		// caller's.
		info, err := c.Inspect(ctx, n)
		require.NoError(t, err)
		assert.NotEqual(t, holder.Holder(), info.Holder, "held by the waiter")
	} else if held != nil {
		assert.True(t, held.Queued, "refused for the queue, not for a holder's ttl")
	}
	w := <-got
	require.NotNil(t, w)
	assert.Greater(t, w.Token().Seq, holder.Token().Seq)
	require.NoError(t, w.Release(ctx))
	l, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err, "free and nobody queued")
	require.NoError(t, l.Release(ctx))
}

// TestFairWaiterContextEnds: a waiter whose context ends leaves the queue,
// and the next release goes to the waiter behind it.
func TestFairWaiterContextEnds(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	holder, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)

	gone, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Acquire(gone, n, time.Minute); done <- err }()
	waitQueued(t, shared, n, 1)
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := c.Acquire(ctx, n, time.Minute)
		assert.NoError(t, err)
		got <- l
	}()
	waitQueued(t, shared, n, 2)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	waitQueued(t, shared, n, 1)

	require.NoError(t, holder.Release(ctx))
	select {
	case l := <-got:
		require.NoError(t, l.Release(ctx))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind the one that left did not get the lock")
	}
}

// TestFairKilledWaiter: a waiter that died (its ticket is there, nobody
// renews it) holds up nobody once its ticket expired, and a lock handed to
// it while its ticket was live is free again within the ttl it asked for,
// or the 2s claim window when that ttl is longer.
func TestFairKilledWaiter(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	keys := protocol.KeysFor("fencelock:", n)
	// dead queues a waiter the way a waiting Acquire does, and then never
	// renews its ticket: what a killed process leaves behind.
	dead := func(holder string, ttl time.Duration) {
		_, err := protocol.Acquire(ctx, shared, keys, protocol.Try{Holder: holder, TTL: ttl,
			Counter: protocol.Counter{TTL: lease.DefaultCounterTTL}, Fair: true, Attempt: protocol.NewAttempt()})
		require.NoError(t, err)
	}

	t.Run("ticket expired", func(t *testing.T) {
		holder, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		dead("dead-1", time.Minute)
		assert.Equal(t, int64(1), queued(t, shared, n))
		time.Sleep(2100 * time.Millisecond) // the ticket's 2s
		assert.Zero(t, queued(t, shared, n), "the dead waiter dropped out")
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := c.Acquire(ctx, n, time.Minute)
			assert.NoError(t, err)
			got <- l
		}()
		waitQueued(t, shared, n, 1)
		require.NoError(t, holder.Release(ctx))
		l := <-got
		require.NotNil(t, l)
		info, err := c.Inspect(ctx, n)
		require.NoError(t, err)
		assert.Equal(t, l.Token(), info.Token, "the live waiter, not the dead one, has it")
		require.NoError(t, l.Release(ctx))
	})
	t.Run("handed to it", func(t *testing.T) {
		holder, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		dead("dead-2", 300*time.Millisecond)
		require.NoError(t, holder.Release(ctx))
		info, err := c.Inspect(ctx, n)
		require.NoError(t, err)
		assert.Equal(t, "dead-2", info.Holder, "the release handed it to the dead waiter")
		assert.Greater(t, info.Token.Seq, holder.Token().Seq)
		l, err := c.Acquire(ctx, n, time.Minute)
		require.NoError(t, err, "free again once the dead waiter's 300ms ran out")
		require.NoError(t, l.Release(ctx))
	})
	t.Run("handed to it, a minute's ttl", func(t *testing.T) {
		holder, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		dead("dead-3", time.Minute)
		require.NoError(t, holder.Release(ctx))
		info, err := c.Inspect(ctx, n)
		require.NoError(t, err)
		assert.Equal(t, "dead-3", info.Holder, "the release handed it to the dead waiter")
		assert.LessOrEqual(t, info.TTL, protocol.TicketTTL, "handed over for the claim window, not the dead waiter's minute")
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		l, err := c.Acquire(actx, n, time.Minute)
		require.NoError(t, err, "free again once the claim window ran out")
		require.NoError(t, l.Release(ctx))
	})
}

// TestFairWaitersShareOneConnection: 1,000 waiters on 100 locks of one
// Client use one pub/sub connection, which closes after they are done.
func TestFairWaitersShareOneConnection(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	admin := r.Client()
	t.Cleanup(func() { admin.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()

	const locks, per = 100, 10
	holders := make([]*lease.Lease, locks)
	for i := range holders {
		holders[i], err = c.TryAcquire(ctx, fmt.Sprintf("w%d", i), time.Minute)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	seqs := make([][]uint64, locks)
	var mu sync.Mutex
	for i := range locks {
		for range per {
			wg.Go(func() {
				l, err := c.Acquire(ctx, fmt.Sprintf("w%d", i), time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				seqs[i] = append(seqs[i], l.Token().Seq)
				mu.Unlock()
				assert.NoError(t, l.Release(ctx))
			})
		}
	}
	for i := range locks {
		waitQueued(t, rdb, fmt.Sprintf("w%d", i), per)
	}
	pubsub := func() int {
		list, err := admin.ClientList(ctx).Result()
		require.NoError(t, err)
		n := 0
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " sub=") && !strings.Contains(line, " sub=0 ") {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, pubsub(), "1,000 waiters, one pub/sub connection")
	for _, h := range holders {
		require.NoError(t, h.Release(ctx))
	}
	wg.Wait()
	for i, s := range seqs {
		require.Len(t, s, per, "lock %d", i)
		for j := 1; j < len(s); j++ {
			assert.Greater(t, s[j], s[j-1], "lock %d: tokens grow in handoff order", i)
		}
	}
	assert.Eventually(t, func() bool { return pubsub() == 0 }, 10*time.Second, 50*time.Millisecond,
		"the connection closes once nobody waits")
}

// TestFairCluster: fair handoff across a 3-master Redis Cluster, with the
// client's one pub/sub connection.
func TestFairCluster(t *testing.T) {
	cl := testenv.NewCluster(t, 3)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	for i := range 6 { // names on every master
		n := fmt.Sprintf("fair-cluster-%d", i)
		holder, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		got := make(chan *lease.Lease, 2)
		for range 2 {
			go func() {
				l, err := c.Acquire(ctx, n, time.Minute)
				assert.NoError(t, err)
				got <- l
			}()
		}
		waitQueued(t, rdb, n, 2)
		require.NoError(t, holder.Release(ctx))
		a := <-got
		require.NotNil(t, a)
		require.NoError(t, a.Release(ctx))
		b := <-got
		require.NotNil(t, b)
		assert.Greater(t, b.Token().Seq, a.Token().Seq)
		assert.Greater(t, a.Token().Seq, holder.Token().Seq)
		require.NoError(t, b.Release(ctx))
	}
}

// TestUnfairWakesAndBarges: WithFair(false) keeps no queue; waiters still
// get the lock, one release at a time.
func TestUnfairWakesAndBarges(t *testing.T) {
	c := countingClient(t, lease.WithFair(false))
	n := counting(t, shared, name(t))
	mutualExclusion(t, c, n, 8, 20)
	assert.Zero(t, queued(t, shared, n), "no queue")
}

// TestWaiterWithoutSubscription: with the client's pub/sub connection
// killed while a waiter waits, the release's message is lost, and the
// waiter still gets the lock (its next try finds it handed over); go-redis
// reconnects and subscribes again for the next waiter.
func TestWaiterWithoutSubscription(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	admin := r.Client()
	t.Cleanup(func() { admin.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	n := name(t)

	for round := range 2 {
		holder, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := c.Acquire(ctx, n, time.Minute)
			assert.NoError(t, err)
			got <- l
		}()
		waitQueued(t, rdb, n, 1)
		require.Eventually(t, func() bool {
			m, err := admin.PubSubNumSub(ctx, protocol.KeysFor("fencelock:", n).Channel).Result()
			return err == nil && m[protocol.KeysFor("fencelock:", n).Channel] == 1
		}, 5*time.Second, 2*time.Millisecond, "round %d: subscribed", round)
		if round == 0 {
			killed, err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
			require.NoError(t, err)
			require.Equal(t, int64(1), killed)
		}
		require.NoError(t, holder.Release(ctx))
		select {
		case l := <-got:
			require.NotNil(t, l)
			assert.Greater(t, l.Token().Seq, holder.Token().Seq)
			require.NoError(t, l.Release(ctx))
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter did not get the lock", round)
		}
	}
}

// TestFairWithHolderGivingUpKeepsTheLock: a re-acquire under a holder id
// that still holds the lock, whose context ended, must not release that
// lock when it leaves the queue.
func TestFairWithHolderGivingUpKeepsTheLock(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	l1, err := c.TryAcquire(ctx, n, time.Minute, lease.WithHolder("worker-1"))
	require.NoError(t, err)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Acquire(gone, n, time.Minute, lease.WithHolder("worker-1"))
	require.ErrorIs(t, err, context.Canceled)
	time.Sleep(100 * time.Millisecond) // the background leave has run
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Equal(t, l1.Token(), info.Token, "the lock is still worker-1's")
	_, err = c.TryAcquire(ctx, n, time.Minute)
	assert.ErrorIs(t, err, lease.ErrNotAcquired, "nobody else gets it")
	require.NoError(t, l1.Release(ctx))
}

// TestUncontendedAcquireDoesNotSubscribe: an Acquire that gets the lock at
// its first try costs that one round trip: no pub/sub connection, no
// SUBSCRIBE.
func TestUncontendedAcquireDoesNotSubscribe(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	for i := range 20 {
		l, err := c.Acquire(ctx, fmt.Sprintf("free-%d", i), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	stats, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.NotContains(t, stats, "cmdstat_subscribe:", "no SUBSCRIBE was sent")
}
