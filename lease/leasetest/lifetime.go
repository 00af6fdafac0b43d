package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
)

// ReleaseTwice checks that a release ends the lease (Done, Err wrapping
// Released, Context cancelled with it), frees the lock for another client,
// and that releasing again returns nil; Refresh and Reissue on the
// released lease return its Err.
func releaseTwice(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c, other := h.New(t, s.Addrs), h.New(t, s.Addrs)
	n := lockName(t)
	l := try(t, c, n, time.Minute, Opts{})
	requireLive(t, l, "a new lease")
	require.NoError(t, l.Release(ctx), "the first release")
	requireEnded(t, l, h.Released, lease.ErrReleased)
	assert.NoError(t, l.Release(ctx), "the second release returns nil")
	assert.NoError(t, l.Release(ctx), "and the third")
	assert.ErrorIs(t, l.Err(), h.Released, "Err keeps the first reason")
	assert.ErrorIs(t, l.Refresh(ctx, time.Minute), h.Released, "Refresh of a released lease")
	_, err := l.Reissue(ctx, l.Token().Seq+1)
	assert.ErrorIs(t, err, h.Released, "Reissue of a released lease")

	next := try(t, other, n, time.Minute, Opts{})
	assert.Greater(t, next.Token().Seq, l.Token().Seq, "the next holder's token")
}

// ReleaseLost checks the release of a lease lost to its ttl while another
// holder took the lock: it returns an error wrapping Lost (and lease's
// ErrLost), does not touch the new holder's lock, and the second release
// returns nil.
func releaseLost(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c, other, third := h.New(t, s.Addrs), h.New(t, s.Addrs), h.New(t, s.Addrs)
	n := lockName(t)
	old := try(t, c, n, 100*time.Millisecond, Opts{})
	waitDone(t, old, 5*time.Second)
	next, err := other.Acquire(ctxFor(t, 10*time.Second), n, time.Minute, Opts{})
	require.NoError(t, err, "the lock expired on the servers")
	t.Cleanup(func() { _ = next.Release(context.Background()) })

	err = old.Release(ctx)
	assert.ErrorIs(t, err, h.Lost, "the release of a lost lease says so")
	assert.ErrorIs(t, err, lease.ErrLost)
	assert.NoError(t, old.Release(ctx), "the second release returns nil")
	assert.ErrorIs(t, old.Err(), h.Lost, "Err keeps the first reason")

	_, err = third.TryAcquire(ctx, n, time.Minute, Opts{})
	assert.ErrorIs(t, err, h.NotAcquired, "the lost lease's release left the new holder's lock alone")
	assert.NoError(t, next.Refresh(ctx, time.Minute), "the new holder still has the lock")
	requireLive(t, next, "the new holder's lease")
}

// Loss checks a lease that its ttl ends, with the servers keeping time
// and nobody refreshing: Done closes at or after its local deadline, Err
// wraps Lost (and lease's ErrLost), Context is cancelled with Err as cause,
// Held is false, Refresh and Reissue say it is lost, and the lock is free
// for another client.
func loss(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c, other := h.New(t, s.Addrs), h.New(t, s.Addrs)
	n := lockName(t)
	const ttl = 200 * time.Millisecond
	start := time.Now()
	l := try(t, c, n, ttl, Opts{})
	requireLive(t, l, "a new lease")
	assert.WithinRange(t, l.Deadline(), start.Add(ttl/2), time.Now().Add(ttl), "the local deadline: start + ttl - drift")
	waitDone(t, l, ttl+5*time.Second)
	assert.False(t, time.Now().Before(l.Deadline()), "Done closed at or after the local deadline, not before")
	requireEnded(t, l, h.Lost, lease.ErrLost)
	assert.ErrorIs(t, l.Refresh(ctx, time.Minute), h.Lost, "Refresh of a lost lease")
	_, err := l.Reissue(ctx, l.Token().Seq+1)
	assert.ErrorIs(t, err, h.Lost, "Reissue of a lost lease")

	next, err := other.Acquire(ctxFor(t, 10*time.Second), n, time.Minute, Opts{})
	require.NoError(t, err, "the lock expired on the servers")
	assert.Greater(t, next.Token().Seq, l.Token().Seq)
	require.NoError(t, next.Release(ctx))
}

// KeepAlive checks that keep-alive holds a lease for several ttls (another
// client cannot take the lock meanwhile) and that it stops on Release: the
// lock stays free afterwards, past the keep-alive's interval.
func keepAlive(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c, other := h.New(t, s.Addrs), h.New(t, s.Addrs)
	n := lockName(t)
	const ttl = 300 * time.Millisecond
	l := try(t, c, n, ttl, Opts{KeepAlive: true})
	time.Sleep(4 * ttl)
	requireLive(t, l, "kept alive across four ttls")
	_, err := other.TryAcquire(ctx, n, time.Minute, Opts{})
	assert.ErrorIs(t, err, h.NotAcquired, "the lock is still held on the servers")

	require.NoError(t, l.Release(ctx))
	requireEnded(t, l, h.Released, lease.ErrReleased)
	next := try(t, other, n, ttl, Opts{})
	require.NoError(t, next.Release(ctx))
	time.Sleep(2 * ttl) // a keep-alive that went on would set the lock again
	free := try(t, other, n, time.Minute, Opts{})
	require.NoError(t, free.Release(ctx))
	assert.ErrorIs(t, l.Err(), h.Released, "the lease stays released")
}
