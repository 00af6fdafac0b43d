package leasetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

const (
	// callDeadline is the context deadline of the calls the deadline tests
	// make.
	callDeadline = testenv.CallDeadline
	// margin is how long after callDeadline such a call may return. A call
	// that honours its context returns within milliseconds of it; the margin
	// is for shared, noisy test machines. A call that waits for its own
	// timeouts or cleanups instead takes longer.
	margin = 2 * time.Second
)

// within calls f with a context that ends after callDeadline, and fails the
// test (without stopping it) when f returned more than margin after it.
func within(t testing.TB, what string, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callDeadline)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	t.Logf("%s: returned after %v (deadline %v); err: %v", what, took.Round(time.Millisecond), callDeadline, err)
	if took > callDeadline+margin {
		t.Errorf("%s outlived its context: returned after %v, more than the %v deadline + %v",
			what, took.Round(time.Millisecond), callDeadline, margin)
	}
	return err
}

// acquireEnded asserts the error of an acquire that its context's deadline
// ended.
func acquireEnded(t testing.TB, h Harness, err error) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, h.NotAcquired)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// Deadlines checks that no call outlives its context: with a majority of
// its servers frozen by SIGSTOP (connections open, nothing answers; all of
// one server), TryAcquire, Acquire, Refresh and Release return by their
// deadline (within margin); an acquire's error wraps
// NotAcquired and context.DeadlineExceeded, Refresh leaves the lease as it
// was, Release ends it. The acquires may have taken the lock on the frozen
// servers: once they resume, the kind's release in the background must
// free it within a few seconds (the ttl is a minute). A waiting Acquire on
// a lock held elsewhere also gives up at its deadline, or at once when its
// context is cancelled, with context.Canceled in the error.
func deadlines(t *testing.T, h Harness, shared servers) {
	ctx := ctxFor(t, time.Minute)
	s := newServers(t, h)
	c := h.New(t, s.Addrs)
	// Open the connections and load the scripts.
	require.NoError(t, try(t, c, lockName(t), time.Minute, Opts{}).Release(ctx))
	toRefresh := try(t, c, lockName(t), time.Minute, Opts{})
	toRelease := try(t, c, lockName(t), time.Minute, Opts{})
	tryName, acquireName := lockName(t), lockName(t)

	frozen := s.majority()
	resume := func() {
		for _, r := range frozen {
			_ = r.Resume()
		}
	}
	t.Cleanup(resume) // runs before the releases of the leases above
	for _, r := range frozen {
		require.NoError(t, r.Pause())
	}
	t.Run("Frozen", func(t *testing.T) {
		t.Run("TryAcquire", func(t *testing.T) {
			t.Parallel()
			acquireEnded(t, h, within(t, "TryAcquire", func(ctx context.Context) error {
				_, err := c.TryAcquire(ctx, tryName, time.Minute, Opts{})
				return err
			}))
		})
		t.Run("Acquire", func(t *testing.T) {
			t.Parallel()
			acquireEnded(t, h, within(t, "Acquire", func(ctx context.Context) error {
				_, err := c.Acquire(ctx, acquireName, time.Minute, Opts{})
				return err
			}))
		})
		t.Run("Refresh", func(t *testing.T) {
			t.Parallel()
			err := within(t, "Refresh", func(ctx context.Context) error { return toRefresh.Refresh(ctx, time.Minute) })
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			requireLive(t, toRefresh, "a refresh that could not reach the servers leaves the lease as it was")
		})
		t.Run("Release", func(t *testing.T) {
			t.Parallel()
			err := within(t, "Release", func(ctx context.Context) error { return toRelease.Release(ctx) })
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			requireEnded(t, toRelease, h.Released, lease.ErrReleased)
			assert.NoError(t, toRelease.Release(ctx), "the second release returns nil")
		})
	})
	resume()
	t.Run("LostReplyReleased", func(t *testing.T) {
		for _, n := range []string{tryName, acquireName} {
			assert.NoError(t, waitFree(t, c, n, 5*time.Second),
				"the lock of an acquire whose reply was lost to its deadline must be released in the background")
		}
	})
	t.Run("HeldAcquire", func(t *testing.T) {
		c := h.New(t, shared.Addrs)
		n := lockName(t)
		try(t, c, n, time.Minute, Opts{})
		acquireEnded(t, h, within(t, "Acquire", func(ctx context.Context) error {
			_, err := c.Acquire(ctx, n, time.Minute, Opts{})
			return err
		}))
		err := within(t, "Acquire cancelled", func(ctx context.Context) error {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err := c.Acquire(ctx, n, time.Minute, Opts{})
			return err
		})
		assert.ErrorIs(t, err, h.NotAcquired)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// ClosedPort checks calls against servers that refuse connections: on
// ports nothing listens on, TryAcquire and Acquire (of a client that dials
// once) return the refusal before their deadline; with a majority of the
// servers killed under held leases, Refresh and Release return an error by their deadline,
// Refresh leaving the lease as it was and Release ending it.
func closedPort(t *testing.T, h Harness) {
	addrs := make([]string, h.Servers)
	for i := range addrs {
		addrs[i] = testenv.ClosedAddr(t)
	}
	closed := h.New(t, addrs)
	for _, a := range []struct {
		name string
		f    func(ctx context.Context, name string, ttl time.Duration, o Opts) (Lease, error)
	}{{"TryAcquire", closed.TryAcquire}, {"Acquire", closed.Acquire}} {
		t.Run(a.name, func(t *testing.T) {
			err := within(t, a.name, func(ctx context.Context) error {
				_, err := a.f(ctx, lockName(t), time.Minute, Opts{})
				return err
			})
			require.Error(t, err)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "the refusal came before the deadline")
			assert.True(t, strings.Contains(err.Error(), "connection refused"), "the refusal is in the error: %v", err)
		})
	}

	s := newServers(t, h)
	c := h.New(t, s.Addrs)
	toRefresh := try(t, c, lockName(t), time.Minute, Opts{})
	toRelease := try(t, c, lockName(t), time.Minute, Opts{})
	for _, r := range s.majority() {
		require.NoError(t, r.Kill())
	}
	t.Run("Refresh", func(t *testing.T) {
		err := within(t, "Refresh", func(ctx context.Context) error { return toRefresh.Refresh(ctx, time.Minute) })
		require.Error(t, err)
		requireLive(t, toRefresh, "a refresh that could not reach the servers leaves the lease as it was")
	})
	t.Run("Release", func(t *testing.T) {
		err := within(t, "Release", func(ctx context.Context) error { return toRelease.Release(ctx) })
		require.Error(t, err)
		requireEnded(t, toRelease, h.Released, lease.ErrReleased)
	})
}
