package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
)

// TestContextEndsWithTheLease: Context is cancelled when the lease ends,
// with Err as its cause, for each way a lease ends.
func TestContextEndsWithTheLease(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()

	t.Run("release", func(t *testing.T) {
		l, err := c.TryAcquire(ctx, name(t), time.Minute)
		require.NoError(t, err)
		lctx := l.Context()
		require.NoError(t, lctx.Err(), "live while held")
		require.NoError(t, l.Release(ctx))
		<-lctx.Done()
		assert.ErrorIs(t, context.Cause(lctx), lease.ErrReleased)
		assert.Equal(t, l.Err(), context.Cause(lctx))
	})
	t.Run("deadline", func(t *testing.T) {
		l, err := c.TryAcquire(ctx, name(t), 50*time.Millisecond)
		require.NoError(t, err)
		select {
		case <-l.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the lease's context outlived its deadline")
		}
		assert.ErrorIs(t, context.Cause(l.Context()), lease.ErrLost)
		assert.False(t, time.Now().Before(l.Deadline()), "ended at or after the local deadline")
	})
	t.Run("refresh finds it gone", func(t *testing.T) {
		n := name(t)
		l, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		require.NoError(t, shared.Del(ctx, "fencelock:{"+n+"}").Err())
		assert.ErrorIs(t, l.Refresh(ctx, time.Minute), lease.ErrLost)
		assert.ErrorIs(t, context.Cause(l.Context()), lease.ErrLost)
	})
}

// TestTTLMustLeaveValidity: a ttl that the drift allowance (ttl×0.01 + 2ms)
// eats whole is refused before any I/O; on main 1–2ms were accepted and
// the key set and the counter bumped for a lease dead on arrival.
func TestTTLMustLeaveValidity(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	for _, ttl := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond} {
		_, err := c.TryAcquire(ctx, n, ttl)
		assert.ErrorIs(t, err, lease.ErrInvalid, "ttl %v", ttl)
		_, err = c.Acquire(ctx, n, ttl)
		assert.ErrorIs(t, err, lease.ErrInvalid, "ttl %v", ttl)
	}
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "no key was set")
	assert.Zero(t, info.LastSeq, "the counter was not bumped")

	l, err := c.TryAcquire(ctx, n, 3*time.Millisecond)
	require.NoError(t, err, "3ms leaves 0.97ms of validity")
	assert.ErrorIs(t, l.Refresh(ctx, 2*time.Millisecond), lease.ErrInvalid, "Refresh has the same rule")
}

// TestKeepAliveIntervalBounds: an interval below the floor (10ms) or not
// below the validity is refused before any I/O; on main 1ns made thousands
// of refresh scripts a second and 10s on a 1s ttl lost the lease.
func TestKeepAliveIntervalBounds(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	for _, tc := range []struct {
		ttl, every time.Duration
	}{
		{time.Second, time.Nanosecond},
		{time.Second, 9 * time.Millisecond},
		{time.Second, 10 * time.Second},
		{time.Second, 988 * time.Millisecond}, // validity is 1s - 12ms
		{time.Second, -time.Second},
	} {
		_, err := c.TryAcquire(ctx, n, tc.ttl, lease.WithKeepAlive(tc.every))
		assert.ErrorIs(t, err, lease.ErrInvalid, "keep-alive %v on ttl %v", tc.every, tc.ttl)
	}
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Zero(t, info.LastSeq, "nothing reached Redis")

	for _, every := range []time.Duration{0, 10 * time.Millisecond, 900 * time.Millisecond} {
		l, err := c.TryAcquire(ctx, n, time.Second, lease.WithKeepAlive(every))
		require.NoError(t, err, "keep-alive %v", every)
		require.NoError(t, l.Release(ctx))
	}
}

// TestNilInputs: nil and typed-nil arguments get ErrInvalid, never a panic.
func TestNilInputs(t *testing.T) {
	var typed *redis.Client
	_, err := lease.New(typed)
	assert.ErrorIs(t, err, lease.ErrInvalid, "typed nil *redis.Client")
	_, err = lease.New(nil)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.New(shared, nil)
	assert.ErrorIs(t, err, lease.ErrInvalid, "nil option")

	c := newClient(t)
	var nilCtx context.Context
	_, err = c.TryAcquire(nilCtx, name(t), time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid, "nil context")
	_, err = c.Acquire(nilCtx, name(t), time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid, "nil context")
	_, err = c.TryAcquire(t.Context(), name(t), time.Second, nil)
	assert.ErrorIs(t, err, lease.ErrInvalid, "nil acquire option")

	var nc *lease.Client
	_, err = nc.TryAcquire(t.Context(), name(t), time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid, "nil *Client")

	l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Refresh(nilCtx, time.Minute), lease.ErrInvalid)
	_, err = l.Reissue(nilCtx, 1)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	assert.ErrorIs(t, l.Release(nilCtx), lease.ErrInvalid)
	require.NoError(t, l.Release(t.Context()))

	_, err = c.Inspect(nilCtx, name(t))
	assert.ErrorIs(t, err, lease.ErrInvalid, "Inspect with a nil context")
	_, err = c.Advance(nilCtx, name(t), 1)
	assert.ErrorIs(t, err, lease.ErrInvalid, "Advance with a nil context")
	_, err = nc.Inspect(t.Context(), name(t))
	assert.ErrorIs(t, err, lease.ErrInvalid, "Inspect on a nil *Client")
	assert.ErrorIs(t, nc.Close(t.Context()), lease.ErrInvalid, "Close on a nil *Client")
	assert.ErrorIs(t, c.Close(nilCtx), lease.ErrInvalid, "Close with a nil context")
}

// TestClosedClient: Close refuses new acquires; leases already held keep
// working.
func TestClosedClient(t *testing.T) {
	c := newClient(t)
	l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, c.Close(t.Context()))
	require.NoError(t, c.Close(t.Context()), "twice")
	_, err = c.TryAcquire(t.Context(), name(t), time.Minute)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = c.Acquire(t.Context(), name(t), time.Minute)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	require.NoError(t, l.Refresh(t.Context(), time.Minute))
	require.NoError(t, l.Release(t.Context()))
}

// TestRefreshAndReleaseAreSerialised: a release racing refreshes wins for
// good: afterwards every refresh returns ErrReleased and the key is gone.
func TestRefreshAndReleaseAreSerialised(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	l, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				if err := l.Refresh(ctx, time.Minute); err != nil {
					if !errors.Is(err, lease.ErrReleased) {
						t.Errorf("refresh: %v", err)
					}
					return
				}
			}
		})
	}
	time.Sleep(time.Millisecond)
	require.NoError(t, l.Release(ctx))
	wg.Wait()
	assert.ErrorIs(t, l.Refresh(ctx, time.Minute), lease.ErrReleased)
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Empty(t, info.Holder)
}
