package lease_test

// A fair waiter that dies (in another process) must not strand the lock:
// once the holder releases, the live waiter behind it gets the lock within
// the claim window, not after the ttl the dead one asked for.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

const (
	// deadTTL is the ttl the dying waiter asks for: the lock stayed taken
	// that long when a release handed it to the dead waiter.
	deadTTL = 20 * time.Second
	// claimWindow is how long a lock handed to a fair waiter lasts until
	// its new holder, alive, confirms it (the ticket's lifetime, 2s, as
	// WithFair's doc states).
	claimWindow = 2 * time.Second
)

// TestProcessDeadWaiterStrandsNoLock: a fair waiter W in another process,
// queued ahead of a live waiter X, dies in one of three ways; the holder
// then releases, which hands the lock to W, dead. X must get the lock
// within a few seconds, though W asked for a 20s ttl: the handed lock
// lasts the claim window only, since W never confirms it.
func TestProcessDeadWaiterStrandsNoLock(t *testing.T) {
	r, rdb := procRedis(t)
	hc, err := lease.New(rdb)
	require.NoError(t, err)
	xc, err := lease.New(rdb)
	require.NoError(t, err)

	t.Run("context ended, exit without Close", func(t *testing.T) {
		// log.Fatal(err) right after Acquire failed: its leave, in the
		// background, may not go out. A round whose leave did go out
		// strands nothing either way; try until one did not.
		t.Setenv(procExitEnv, "1")
		for round := 0; ; round++ {
			require.Less(t, round, 8, "in every round the waiter left the queue before it exited: nothing to test")
			if strandRound(t, r, rdb, hc, xc, 300*time.Millisecond, func(*testing.T, *procChild, string) {}) {
				return
			}
		}
	})
	t.Run("SIGKILL while queued", func(t *testing.T) {
		strandRound(t, r, rdb, hc, xc, time.Minute, func(t *testing.T, w *procChild, _ string) {
			require.NoError(t, w.cmd.Process.Kill())
		})
	})
	t.Run("SIGKILL right after the handoff", func(t *testing.T) {
		// Frozen while subscribed, so that the handoff is published to it
		// and never read; killed once the release handed it the lock.
		strandRound(t, r, rdb, hc, xc, time.Minute, func(t *testing.T, w *procChild, n string) {
			procWaitSubscribed(t, rdb, n)
			pid := w.cmd.Process.Pid
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
			require.True(t, faults.WaitStopped(t.Context(), pid, 5*time.Second), "W stopped")
		}, func(t *testing.T, w *procChild) {
			require.NoError(t, w.cmd.Process.Kill())
		})
	})
}

// strandRound is one round: H holds, W (a child that asks for deadTTL and
// waits up to wait) queues, X queues behind it, die kills W (or lets it
// exit), H releases, then afterRelease (if given) runs, and X must get the
// lock within a few seconds. It reports false when W was out of the queue
// by the release (its leave went out): the round tested nothing.
func strandRound(t *testing.T, r *testenv.Redis, rdb *redis.Client, hc, xc *lease.Client, wait time.Duration,
	die func(*testing.T, *procChild, string), afterRelease ...func(*testing.T, *procChild)) bool {
	// no t.Helper: failures point here
	ctx := t.Context()
	n := name(t)
	h, err := hc.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)

	w := startProcChild(t, r.Addr(), n, deadTTL, wait, false)
	var wID string
	require.Eventually(t, func() bool {
		if m := procQueue(t, rdb, n); len(m) == 1 {
			wID = m[0]
		}
		return wID != ""
	}, 10*time.Second, time.Millisecond, "W queued")

	type result struct {
		l   *lease.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	xctx, cancel := context.WithTimeout(ctx, deadTTL/2)
	defer cancel()
	go func() {
		l, err := xc.Acquire(xctx, n, time.Minute)
		got <- result{l, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return len(procQueue(t, rdb, n)) == 2 }, 10*time.Second, time.Millisecond, "X queued behind W")

	die(t, w, n)
	if len(afterRelease) == 0 {
		w.waitExit(t, 10*time.Second)
		if _, err := rdb.ZScore(ctx, procQueueKey(n), wID).Result(); err != nil {
			t.Logf("W %s left the queue before it exited (%v): another round", wID, err)
			require.NoError(t, h.Release(ctx))
			res := <-got
			require.NoError(t, res.err)
			require.NoError(t, res.l.Release(ctx))
			return false
		}
	}

	require.NoError(t, h.Release(ctx))
	released := time.Now()
	v, err := rdb.Get(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	require.True(t, procHolderOf(v, wID), "the release handed the lock to the dead W (%s); Redis has %q", wID, v)
	handed := v
	pttl, err := rdb.PTTL(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	for _, f := range afterRelease {
		f(t, w)
	}

	res := <-got
	took := res.at.Sub(released)
	t.Logf("W %s died; the lock handed to it had ttl %v; X got the lock %v after the release (err %v)", wID, pttl, took.Round(time.Millisecond), res.err)
	assert.LessOrEqual(t, pttl, claimWindow, "the lock handed to W has W's %v ttl, not the claim window", deadTTL)
	require.NoError(t, res.err, "X did not get the lock within %v of the release: the dead W's %v ttl stranded it", deadTTL/2, deadTTL)
	assert.Less(t, took, claimWindow+3*time.Second, "X waited for the lock that W's death stranded")
	v, err = rdb.Get(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	assert.True(t, procHolderOf(v, res.l.Holder()), "Redis holds X's id, has %q", v)
	assert.Greater(t, res.l.Token().Seq, handedSeq(t, handed), "X's token after the one handed to W")
	require.NoError(t, res.l.Release(ctx))
	return true
}

// handedSeq is the Seq in lock value v, "holder:seq".
func handedSeq(t *testing.T, v string) uint64 {
	t.Helper()
	_, s, ok := strings.Cut(v, ":")
	require.True(t, ok, "lock value %q", v)
	var seq uint64
	_, err := fmt.Sscan(s, &seq)
	require.NoError(t, err, "lock value %q", v)
	return seq
}

// TestFairHandoffConfirmsClaim: a lease handed over by a fair release
// returns at once with the claim window as its deadline; held past half of
// it, it confirms the lock to its whole ttl (one background refresh, its
// deadline and the key's ttl moved); released first, it sends nothing.
func TestFairHandoffConfirmsClaim(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	var refreshed []observe.Refreshed
	c := newClient(t, lease.WithHooks(&observe.Hooks{Refreshed: func(_ context.Context, e observe.Refreshed) {
		mu.Lock()
		defer mu.Unlock()
		refreshed = append(refreshed, e)
	}}))
	refreshes := func() []observe.Refreshed {
		mu.Lock()
		defer mu.Unlock()
		return append([]observe.Refreshed(nil), refreshed...)
	}
	const ttl = time.Minute
	handoff := func(n string) *lease.Lease {
		h, err := c.TryAcquire(ctx, n, ttl)
		require.NoError(t, err)
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := c.Acquire(ctx, n, ttl)
			assert.NoError(t, err)
			got <- l
		}()
		require.Eventually(t, func() bool { return len(procQueue(t, shared, n)) == 1 }, 10*time.Second, time.Millisecond, "queued")
		procWaitSubscribed(t, shared, n)
		// The waiter tries once more right after it subscribed; a release
		// before that try is read would let the try take the lock back
		// with the whole ttl (correct, but no handoff): let it land first.
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, h.Release(ctx))
		l := <-got
		require.NotNil(t, l)
		return l
	}

	n := name(t)
	l := handoff(n)
	assert.LessOrEqual(t, time.Until(l.Deadline()), claimWindow, "the handed lease counts the claim window")
	pttl, err := shared.PTTL(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, pttl, claimWindow, "the handed lock has the claim window in Redis")
	require.Eventually(t, func() bool { return time.Until(l.Deadline()) > ttl/2 }, 10*time.Second, 10*time.Millisecond,
		"the lease confirmed the lock to its ttl")
	assert.True(t, l.Held())
	pttl, err = shared.PTTL(ctx, procLockKey(n)).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, ttl/2, "the key's ttl moved with the lease's deadline")
	rs := refreshes()
	require.Len(t, rs, 1, "one confirm")
	assert.Equal(t, ttl, rs[0].TTL)
	assert.NoError(t, rs[0].Err)
	assert.Equal(t, l.Token(), rs[0].Token)
	require.NoError(t, l.Release(ctx))

	n = name(t)
	l = handoff(n)
	require.NoError(t, l.Release(ctx), "released at once")
	time.Sleep(claimWindow) // past the moment its confirm would have gone out
	assert.Len(t, refreshes(), 1, "a lease released before half its claim ran sends no confirm")
}
