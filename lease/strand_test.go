package lease_test

// A fair waiter that dies (in another process) must not strand the lock:
// once the holder releases, the live waiter behind it gets the lock within
// the claim window, not after the ttl the dead one asked for.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
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
