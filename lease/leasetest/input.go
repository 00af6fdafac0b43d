package leasetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// NilInput checks nil and typed-nil input: a nil context to every call, a
// typed nil client, and every method of a typed nil lease (as a Release
// deferred before the acquire's error was checked calls it) return an
// error wrapping Invalid, or the zero answer, without panicking; a call
// with a nil context leaves a held lease as it was.
func nilInput(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	var nilCtx context.Context
	c := h.New(t, s.Addrs)
	invalid := func(t *testing.T, what string, f func() error) {
		t.Helper()
		noPanic(t, what, func() {
			err := f()
			assert.ErrorIs(t, err, h.Invalid, what)
			assert.ErrorIs(t, err, lease.ErrInvalid, what)
		})
	}

	t.Run("Context", func(t *testing.T) {
		invalid(t, "TryAcquire(nil ctx)", func() error { _, err := c.TryAcquire(nilCtx, lockName(t), time.Minute, Opts{}); return err })
		invalid(t, "Acquire(nil ctx)", func() error { _, err := c.Acquire(nilCtx, lockName(t), time.Minute, Opts{}); return err })
		l := try(t, c, lockName(t), time.Minute, Opts{})
		invalid(t, "Refresh(nil ctx)", func() error { return l.Refresh(nilCtx, time.Minute) })
		invalid(t, "Reissue(nil ctx)", func() error { _, err := l.Reissue(nilCtx, 1); return err })
		invalid(t, "Release(nil ctx)", func() error { return l.Release(nilCtx) })
		requireLive(t, l, "a lease after calls with a nil context")
		require.NoError(t, l.Release(ctx))
	})
	t.Run("Client", func(t *testing.T) {
		invalid(t, "TryAcquire on a nil client", func() error {
			_, err := h.NilClient.TryAcquire(ctx, lockName(t), time.Minute, Opts{})
			return err
		})
		invalid(t, "Acquire on a nil client", func() error {
			_, err := h.NilClient.Acquire(ctx, lockName(t), time.Minute, Opts{})
			return err
		})
	})
	t.Run("Lease", func(t *testing.T) {
		l := h.NilLease
		invalid(t, "Release", func() error { return l.Release(ctx) })
		invalid(t, "Release(nil ctx)", func() error { return l.Release(nilCtx) })
		invalid(t, "Refresh", func() error { return l.Refresh(ctx, time.Minute) })
		invalid(t, "Reissue", func() error { _, err := l.Reissue(ctx, 1); return err })
		invalid(t, "Err", func() error { return l.Err() })
		invalid(t, "Context's cause", func() error { return context.Cause(l.Context()) })
		noPanic(t, "Held, Token, Deadline, Done", func() {
			assert.False(t, l.Held(), "Held")
			assert.Equal(t, fence.Token{}, l.Token(), "Token")
			assert.True(t, l.Deadline().IsZero(), "Deadline")
			select {
			case <-l.Done():
			default:
				t.Error("Done of a nil lease is not closed")
			}
		})
	})
}

// BadInput checks that bad names and ttls are refused with Invalid before
// any I/O: the lock is not taken and its counter not bumped.
func badInput(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c := h.New(t, s.Addrs)
	n := lockName(t)
	before := try(t, c, n, time.Minute, Opts{})
	require.NoError(t, before.Release(ctx))
	for _, tc := range []struct {
		what string
		name string
		ttl  time.Duration
	}{
		{"empty name", "", time.Minute},
		{"braced name", "a{" + n + "}", time.Minute},
		{"over-long name", strings.Repeat("n", 100_000), time.Minute},
		{"zero ttl", n, 0},
		{"negative ttl", n, -time.Second},
		{"ttl below a millisecond", n, 999 * time.Microsecond},
		{"ttl the drift eats", n, 2 * time.Millisecond},
	} {
		noPanic(t, tc.what, func() {
			_, err := c.TryAcquire(ctx, tc.name, tc.ttl, Opts{})
			assert.ErrorIs(t, err, h.Invalid, "TryAcquire: %s", tc.what)
			_, err = c.Acquire(ctx, tc.name, tc.ttl, Opts{})
			assert.ErrorIs(t, err, h.Invalid, "Acquire: %s", tc.what)
		})
	}
	after := try(t, c, n, time.Minute, Opts{})
	assert.Equal(t, before.Token().Seq+1, after.Token().Seq, "no refused acquire bumped the counter")
}
