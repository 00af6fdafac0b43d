package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

func TestNewRejects(t *testing.T) {
	three := sharedRDB[:3]
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []redlock.Option
	}{
		{"no nodes", nil, nil},
		{"one node", sharedRDB[:1], nil},
		{"two nodes", sharedRDB[:2], nil},
		{"four nodes", sharedRDB[:4], nil},
		{"nil node", []redis.UniversalClient{sharedRDB[0], nil, sharedRDB[1]}, nil},
		{"duplicate", []redis.UniversalClient{sharedRDB[0], sharedRDB[1], sharedRDB[0]}, nil},
		{"prefix brace", three, []redlock.Option{lease.WithPrefix("a{")}},
		{"drift", three, []redlock.Option{lease.WithDriftFactor(0.5)}},
		{"negative drift", three, []redlock.Option{lease.WithDriftFactor(-0.1)}},
		{"node timeout", three, []redlock.Option{redlock.WithNodeTimeout(0)}},
		{"backoff", three, []redlock.Option{lease.WithBackoff(time.Second, time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.New(tc.nodes, tc.opts...)
			assert.ErrorIs(t, err, lease.ErrInvalid)
			assert.ErrorIs(t, err, lease.ErrInvalid)
		})
	}

	for _, n := range []int{1, 2, 4} {
		c, err := redlock.New(sharedRDB[:n], redlock.WithForceNodeCount())
		require.NoError(t, err, "%d nodes, forced", n)
		assert.Equal(t, n/2+1, quorumOf(t, c))
	}
	c := newLocker(t, sharedRDB)
	assert.Equal(t, 3, quorumOf(t, c))
	for i, addr := range nodeAddrs(t, c) {
		assert.Equal(t, shared[i].Addr(), addr)
	}
}

func TestAcquireRejectsBadInputWithoutIO(t *testing.T) {
	c := newLocker(t, sharedRDB[:3])
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		opts []lease.AcquireOption
	}{
		{"", time.Second, nil},
		{"a{b}", time.Second, nil},
		{"ok", 0, nil},
		{"ok", 2 * time.Millisecond, nil}, // all drift, no validity
		{"ok", time.Second, []lease.AcquireOption{lease.WithKeepAlive(-1)}},
		{"ok", time.Second, []lease.AcquireOption{lease.WithKeepAlive(time.Second)}},
	} {
		_, err := c.TryAcquire(ctx, tc.name, tc.ttl, tc.opts...)
		assert.ErrorIs(t, err, lease.ErrInvalid, "%q %v", tc.name, tc.ttl)
		_, err = c.Acquire(ctx, tc.name, tc.ttl, tc.opts...)
		assert.ErrorIs(t, err, lease.ErrInvalid, "%q %v", tc.name, tc.ttl)
	}
	_, err := c.Advance(ctx, "a}", 1)
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

func TestAcquireRefreshRelease(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB)
	n := name(t)
	keys := protocol.KeysFor(lease.DefaultPrefix, n)

	before := time.Now()
	l, err := c.TryAcquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	tok := l.Token()
	assert.Equal(t, n, tok.Key)
	assert.Equal(t, n, l.Name())
	assert.Equal(t, l.Holder(), tok.Holder)
	// Without quorum fencing no counter is kept: Seq 0, which no verifier
	// accepts (an efficiency lock).
	assert.Zero(t, tok.Seq)
	assert.ErrorIs(t, tok.Validate(), fence.ErrMalformed)
	assert.True(t, l.Held())
	assert.NoError(t, l.Err())
	// deadline = start + ttl - drift (10s*0.01 + 2ms)
	assert.WithinRange(t, l.Deadline(), before.Add(10*time.Second-102*time.Millisecond), time.Now().Add(10*time.Second-102*time.Millisecond))

	// Every node holds it under the same holder.
	for i, rdb := range sharedRDB {
		st, err := protocol.Inspect(ctx, rdb, keys)
		require.NoError(t, err)
		assert.Equal(t, l.Holder(), st.Holder, "node %d", i)
	}

	_, err = c.TryAcquire(ctx, n, time.Second)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	var ne *redlock.NodeError
	assert.False(t, errors.As(err, &ne), "a held lock is not a node failure: %v", err)

	old := l.Deadline()
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, l.Refresh(ctx, 20*time.Second))
	assert.True(t, l.Deadline().After(old.Add(9*time.Second)))
	st, err := protocol.Inspect(ctx, sharedRDB[0], keys)
	require.NoError(t, err)
	assert.Greater(t, st.PTTL, 15*time.Second)
	assert.Equal(t, tok, l.Token(), "refresh keeps the token")

	require.NoError(t, l.Release(ctx))
	<-l.Done()
	assert.ErrorIs(t, l.Err(), lease.ErrReleased)
	assert.ErrorIs(t, l.Err(), lease.ErrReleased)
	assert.False(t, l.Held())
	assert.NoError(t, l.Release(ctx), "second release")
	assert.ErrorIs(t, l.Refresh(ctx, time.Second), lease.ErrReleased)
	for i, rdb := range sharedRDB {
		st, err := protocol.Inspect(ctx, rdb, keys)
		require.NoError(t, err)
		assert.Empty(t, st.Holder, "node %d", i)
	}

	l2, err := c.TryAcquire(ctx, n, time.Second)
	require.NoError(t, err)
	assert.NotEqual(t, l.Holder(), l2.Holder())
	require.NoError(t, l2.Release(ctx))
}

func TestRefreshResetsLostKeysAndDetectsLoss(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB, redlock.WithQuorumFencing(true))
	n := name(t)
	keys := protocol.KeysFor(lease.DefaultPrefix, n)
	l, err := c.TryAcquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	defer l.Release(context.WithoutCancel(ctx))

	// A minority forgets the lock and its counter (as after a restart
	// without persistence): refresh still has a majority, sets the key
	// again there and lifts the counter back to the token.
	for _, rdb := range sharedRDB[:2] {
		require.NoError(t, rdb.Del(ctx, keys.Lock, keys.Counter).Err())
	}
	require.NoError(t, l.Refresh(ctx, 10*time.Second))
	for i, rdb := range sharedRDB {
		st, err := protocol.Inspect(ctx, rdb, keys)
		require.NoError(t, err)
		assert.Equal(t, l.Holder(), st.Holder, "node %d", i)
		assert.GreaterOrEqual(t, st.LastSeq, l.Token().Seq, "node %d", i)
	}

	// A majority loses it: the lease is lost, and released everywhere.
	for _, rdb := range sharedRDB[:3] {
		require.NoError(t, rdb.Del(ctx, keys.Lock).Err())
	}
	err = l.Refresh(ctx, 10*time.Second)
	assert.ErrorIs(t, err, lease.ErrLost)
	assert.ErrorIs(t, err, lease.ErrLost)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after a lost refresh")
	}
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
	// The lost lease is released everywhere, in the background.
	for i, rdb := range sharedRDB {
		assert.Eventually(t, func() bool {
			st, err := protocol.Inspect(ctx, rdb, keys)
			return err == nil && st.Holder == ""
		}, 5*time.Second, 10*time.Millisecond, "node %d", i)
	}
	assert.ErrorIs(t, l.Release(ctx), lease.ErrLost, "release of a lost lease says so")
	assert.NoError(t, l.Release(ctx), "and the second release returns nil")
}

func TestAcquireWaitsForRelease(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB)
	n := name(t)
	first, err := c.TryAcquire(ctx, n, 10*time.Second)
	require.NoError(t, err)

	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		released <- time.Now()
		assert.NoError(t, first.Release(ctx))
	}()
	second, err := c.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	handoff := time.Since(<-released)
	defer second.Release(ctx)
	// The backoff alone would make this up to 1s; the wake-up makes it a
	// few ms. Generous bound for a loaded machine.
	assert.Less(t, handoff, 150*time.Millisecond, "handoff")
	t.Logf("handoff after release: %v", handoff)

	// A waiter whose context ends gives up with both errors.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(wctx, n, time.Second)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestAcquireWaitsForExpiry(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB[:3], redlock.WithWakeup(false))
	n := name(t)
	first, err := c.TryAcquire(ctx, n, 300*time.Millisecond)
	require.NoError(t, err)
	start := time.Now()
	second, err := c.Acquire(ctx, n, time.Second)
	require.NoError(t, err)
	defer second.Release(ctx)
	// It waits for the remaining ttl the nodes reported, not a long backoff.
	assert.Less(t, time.Since(start), 600*time.Millisecond)
	<-first.Done()
}

// TestNoGoroutineLeak runs contended waits, a release wake-up and a node
// timeout, and checks that every goroutine they started has ended.
func TestNoGoroutineLeak(t *testing.T) {
	rs, rdbs := ownNodes(t, 3)
	ctx := ctxFor(t, 20*time.Second)
	before := runtime.NumGoroutine()

	c := newLocker(t, rdbs, redlock.WithNodeTimeout(100*time.Millisecond))
	n := name(t)
	l, err := c.TryAcquire(ctx, n, 5*time.Second, lease.WithKeepAlive(50*time.Millisecond))
	require.NoError(t, err)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			l, err := c.Acquire(ctx, n, 5*time.Second)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Acquire(wctx, n, time.Second)
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, <-done)
	require.NoError(t, <-done)

	require.NoError(t, rs[2].Pause())
	l, err = c.TryAcquire(ctx, n, 5*time.Second)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Release(ctx), redlock.ErrNodeTimeout)
	require.NoError(t, rs[2].Resume())

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func TestAdvance(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB, redlock.WithQuorumFencing(true))
	n := name(t)
	// A missing counter stands at the nodes' clocks: a low floor does not
	// bring it down (the counter rule).
	before := uint64(time.Now().UnixMicro())
	counter, err := c.Advance(ctx, n, 1000)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, counter, before-uint64(time.Second.Microseconds()))
	floor := before + 1e9
	counter, err = c.Advance(ctx, n, floor)
	require.NoError(t, err)
	assert.Equal(t, floor, counter)
	l, err := c.TryAcquire(ctx, n, time.Second)
	require.NoError(t, err)
	assert.Equal(t, floor+1, l.Token().Seq)
	require.NoError(t, l.Release(ctx))
	for i, rdb := range sharedRDB {
		ttl, err := rdb.PTTL(ctx, protocol.KeysFor(lease.DefaultPrefix, n).Counter).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 999*time.Second, "node %d: a counter above the clock lives until the clock passes it", i)
	}
}

func TestNodeErrorNamesTheNode(t *testing.T) {
	e := &redlock.NodeError{Addr: "127.0.0.1:1", Err: redlock.ErrNodeTimeout}
	assert.True(t, strings.Contains(e.Error(), "127.0.0.1:1"))
	assert.ErrorIs(t, e, redlock.ErrNodeTimeout)
}

// TestCountersBounded: quorum fencing's counters expire like the lease's
// (DefaultCounterTTL after their last write), so one-off lock names leave
// nothing behind for good.
func TestCountersBounded(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB, redlock.WithQuorumFencing(true))
	n := name(t)
	l, err := c.TryAcquire(ctx, n, time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	for i, rdb := range sharedRDB {
		ttl, err := rdb.PTTL(ctx, protocol.KeysFor(lease.DefaultPrefix, n).Counter).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "node %d: the counter expires", i)
		assert.LessOrEqual(t, ttl, lease.DefaultCounterTTL, "node %d", i)
	}
}
