package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
)

// TestReacquireAfterBackgroundRelease: a Release whose ctx had ended goes
// on in the background; a re-acquire under the same holder id right after
// must not have its lock deleted by that late release (two live leases).
func TestReacquireAfterBackgroundRelease(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "unfair", true: "fair"}[fair], func(t *testing.T) {
			ctx := t.Context()
			c := newClient(t, lease.WithFair(fair))
			other := newClient(t, lease.WithFair(fair))
			n := name(t)
			l1, err := c.Acquire(ctx, n, 10*time.Second, lease.WithHolder("holder-A"))
			require.NoError(t, err)
			ended, cancel := context.WithCancel(ctx)
			cancel()
			_ = l1.Release(ended) // goes to the background
			l2, err := c.Acquire(ctx, n, 10*time.Second, lease.WithHolder("holder-A"))
			require.NoError(t, err)
			time.Sleep(200 * time.Millisecond) // past any late release
			l3, err := other.TryAcquire(ctx, n, 10*time.Second)
			if err == nil {
				assert.False(t, l2.Held(), "two live leases: %v and %v", l2.Token(), l3.Token())
				_ = l3.Release(ctx)
			}
			_ = l2.Release(ctx)
		})
	}
}

// TestReacquireNotReplicatedKeepsLock: a re-acquire (WithHolder) whose WAIT
// falls short must not delete the lock its holder had before the call.
func TestReacquireNotReplicatedKeepsLock(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "unfair", true: "fair"}[fair], func(t *testing.T) {
			ctx := t.Context()
			c0 := newClient(t, lease.WithFair(fair))
			c1 := newClient(t, lease.WithFair(fair), lease.WithReplicaAck(1, 50*time.Millisecond))
			n := name(t)
			l1, err := c0.Acquire(ctx, n, 10*time.Second, lease.WithHolder("holder-B"))
			require.NoError(t, err)
			_, err = c1.TryAcquire(ctx, n, 10*time.Second, lease.WithHolder("holder-B"))
			require.ErrorIs(t, err, lease.ErrNotReplicated, "the shared Redis has no replica")
			require.NoError(t, c1.Close(ctx), "any cleanup is done")
			info, err := c0.Inspect(ctx, n)
			require.NoError(t, err)
			assert.Equal(t, l1.Token(), info.Token, "the lease's lock is still there")
			require.NoError(t, l1.Release(ctx))
		})
	}
}

// TestHandoffKeepsReplicaAck: a fair handoff to a WithReplicaAck waiter is
// acknowledged like any acquire: with no replica, the waiter gets
// ErrNotReplicated, not a lease.
func TestHandoffKeepsReplicaAck(t *testing.T) {
	ctx := t.Context()
	c0 := newClient(t)
	c1 := newClient(t, lease.WithReplicaAck(1, 50*time.Millisecond))
	n := name(t)
	l0, err := c0.Acquire(ctx, n, 5*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := c1.Acquire(ctx, n, 5*time.Second)
		if l != nil {
			_ = l.Release(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return queued(t, shared, n) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, l0.Release(ctx))
	assert.ErrorIs(t, <-got, lease.ErrNotReplicated)
	require.NoError(t, c1.Close(ctx))
	info, err := c0.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "the unacknowledged lock was released")
}
