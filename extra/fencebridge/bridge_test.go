package fencebridge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/extra/fencebridge"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// setup starts a redis-server and returns a client of it and a lease
// client on that client.
func setup(t *testing.T) (*redis.Client, *lease.Client) {
	t.Helper()
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	locks, err := lease.New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close(context.Background()) })
	return rdb, locks
}

func TestNewRejectsNil(t *testing.T) {
	_, locks := setup(t)
	_, err := fencebridge.New(nil, locks)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	_, err = fencebridge.New(fencebridge.Redsync(nil), nil)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)

	b, err := fencebridge.New(fencebridge.Redsync(nil), locks)
	require.NoError(t, err)
	_, err = b.Acquire(t.Context(), "x", time.Second)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid, "a nil *redsync.Redsync fails at the acquire")
	b, err = fencebridge.New(fencebridge.Redislock(nil, time.Second, nil), locks)
	require.NoError(t, err)
	_, err = b.Acquire(t.Context(), "x", time.Second)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	var l *fencebridge.Lock
	assert.ErrorIs(t, l.Release(t.Context()), fencebridge.ErrInvalid)
}

// TestBadInputTakesNothing: a name or ttl that fencelock refuses is
// refused before the old lock is taken.
func TestBadInputTakesNothing(t *testing.T) {
	rdb, locks := setup(t)
	b, err := fencebridge.New(fencebridge.Redsync(redsync.New(goredis.NewPool(rdb))), locks)
	require.NoError(t, err)
	for name, ttl := range map[string]time.Duration{"user:{42}": time.Second, "": time.Second, "ok": time.Microsecond} {
		_, err := b.Acquire(t.Context(), name, ttl)
		require.ErrorIs(t, err, fencebridge.ErrInvalid, "%q %v", name, ttl)
		n, err := rdb.DBSize(t.Context()).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no key written for %q %v", name, ttl)
	}
	var nilCtx context.Context
	_, err = b.Acquire(nilCtx, "ok", time.Second)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	l, err := b.Acquire(t.Context(), "ok", time.Second)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Release(nilCtx), fencebridge.ErrInvalid)
	require.NoError(t, l.Release(t.Context()))
}

// TestReleaseFreesBoth: a bridge lock holds the old key and fencelock's,
// and its release frees both.
func TestReleaseFreesBoth(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	b, err := fencebridge.New(fencebridge.Redsync(redsync.New(goredis.NewPool(rdb))), locks)
	require.NoError(t, err)

	l, err := b.Acquire(ctx, "reports/nightly", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Token().Validate())
	old, err := rdb.Get(ctx, "reports/nightly").Result()
	require.NoError(t, err, "the old key is held")
	assert.NotEmpty(t, old)
	info, err := locks.Inspect(ctx, "reports/nightly")
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token, "fencelock's key is held")
	assert.WithinDuration(t, time.Now().Add(8*time.Second), l.Deadline(), time.Second,
		"the deadline is redsync's (8s by default), the earlier of the two")

	require.NoError(t, l.Release(ctx))
	assert.ErrorIs(t, l.Context().Err(), context.Canceled, "the context ends on release")
	_, err = rdb.Get(ctx, "reports/nightly").Result()
	assert.ErrorIs(t, err, redis.Nil, "the old key is gone")
	info, err = locks.Inspect(ctx, "reports/nightly")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lock is free")
	assert.NoError(t, l.Release(ctx), "a second release is a no-op")
}

// TestOldHolderExcludesBridge: while an old process (redsync) holds the
// name, the bridge takes neither lock.
func TestOldHolderExcludesBridge(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	rs := redsync.New(goredis.NewPool(rdb))
	m := rs.NewMutex("jobs/a", redsync.WithExpiry(time.Minute))
	require.NoError(t, m.LockContext(ctx))

	b, err := fencebridge.New(fencebridge.Redsync(rs, redsync.WithTries(2)), locks)
	require.NoError(t, err)
	_, err = b.Acquire(ctx, "jobs/a", time.Minute)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	var taken *redsync.ErrTaken
	assert.ErrorAs(t, err, &taken, "redsync's own error stays reachable")
	assert.NotContains(t, err.Error(), "\n", "one line")
	info, err := locks.Inspect(ctx, "jobs/a")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lock was not taken")

	// The same with redislock as the old library.
	rl := redislock.New(rdb)
	held, err := rl.Obtain(ctx, "jobs/b", time.Minute, nil)
	require.NoError(t, err)
	b, err = fencebridge.New(fencebridge.Redislock(rl, time.Minute, nil), locks)
	require.NoError(t, err)
	_, err = b.Acquire(ctx, "jobs/b", time.Minute)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	assert.ErrorIs(t, err, redislock.ErrNotObtained)
	require.NoError(t, held.Release(ctx))
}

// TestNewHolderExcludesBridge: while a fencelock-only process holds the
// name, the bridge waits no longer than its old lock lasts, then gives the
// old lock back, so that old processes are not blocked for nothing.
func TestNewHolderExcludesBridge(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	held, err := locks.Acquire(ctx, "jobs/c", time.Minute)
	require.NoError(t, err)

	b, err := fencebridge.New(fencebridge.Redsync(redsync.New(goredis.NewPool(rdb)),
		redsync.WithExpiry(300*time.Millisecond)), locks)
	require.NoError(t, err)
	_, err = b.Acquire(ctx, "jobs/c", time.Minute)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the wait ended with the old lock's validity")
	assert.NotContains(t, err.Error(), "\n", "one line")
	_, err = rdb.Get(ctx, "jobs/c").Result()
	assert.ErrorIs(t, err, redis.Nil, "the old lock was given back")
	info, err := locks.Inspect(ctx, "jobs/c")
	require.NoError(t, err)
	assert.Equal(t, held.Token(), info.Token, "the fencelock holder keeps its lock")
	require.NoError(t, held.Release(ctx))
}

// TestContextEndsWithTheOldLock: the lock's context ends at the old
// lock's deadline when that comes first, though fencelock's lease lasts.
func TestContextEndsWithTheOldLock(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	b, err := fencebridge.New(fencebridge.Redislock(redislock.New(rdb), 200*time.Millisecond, nil), locks)
	require.NoError(t, err)
	l, err := b.Acquire(ctx, "jobs/d", time.Minute)
	require.NoError(t, err)
	assert.True(t, l.Deadline().Before(time.Now().Add(200*time.Millisecond)))
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context outlived the old lock")
	}
	assert.ErrorIs(t, l.Context().Err(), context.DeadlineExceeded)
	// The local deadline comes first; Redis drops the key a little later.
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "jobs/d").Val() == 0 }, 5*time.Second, 10*time.Millisecond)
	err = l.Release(ctx)
	assert.ErrorIs(t, err, fencebridge.ErrOldNotHeld, "the old lock had expired")
	assert.ErrorIs(t, err, redislock.ErrLockNotHeld)
	info, err := locks.Inspect(ctx, "jobs/d")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lease was released all the same")
}

// TestPeerHolderValues: the holder values redsync and redislock generate
// are accepted by lease.WithHolder, and the token carrying one survives
// its text form and the HTTP header.
func TestPeerHolderValues(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	var values []string
	rs := redsync.New(goredis.NewPool(rdb))
	rl := redislock.New(rdb)
	for range 20 {
		m := rs.NewMutex("peer/redsync")
		require.NoError(t, m.LockContext(ctx))
		values = append(values, m.Value())
		_, err := m.UnlockContext(ctx)
		require.NoError(t, err)
		l, err := rl.Obtain(ctx, "peer/redislock", time.Minute, nil)
		require.NoError(t, err)
		values = append(values, l.Token())
		require.NoError(t, l.Release(ctx))
	}
	sawBase64Std := false
	for _, v := range values {
		sawBase64Std = sawBase64Std || strings.ContainsAny(v, "+/=")
		l, err := locks.TryAcquire(ctx, "peer/fencelock", time.Minute, lease.WithHolder(v))
		require.NoError(t, err, "holder %q", v)
		assert.Equal(t, v, l.Token().Holder)
		back, err := fence.Parse(l.Token().String())
		require.NoError(t, err)
		assert.Equal(t, l.Token(), back)
		info, err := locks.Inspect(ctx, "peer/fencelock")
		require.NoError(t, err)
		assert.Equal(t, v, info.Holder)
		require.NoError(t, l.Release(ctx))
	}
	assert.True(t, sawBase64Std, "redsync's values have '=' padding: %q", values[0])

	_, err := locks.TryAcquire(ctx, "peer/fencelock", time.Minute, lease.WithHolder("a:b"))
	require.ErrorIs(t, err, lease.ErrInvalid)
	assert.True(t, errors.Is(err, fence.ErrMalformed))
	assert.Contains(t, err.Error(), "':' and ',' separate", "the refusal says why")
}

// TestErrorsOnOneLine: redsync joins its nodes' errors one per line; the
// bridge's error reads as one line, and the node errors stay reachable.
func TestErrorsOnOneLine(t *testing.T) {
	rdb, locks := setup(t)
	down1 := testenv.CtxClient(t, testenv.ClosedAddr(t), 1)
	down2 := testenv.CtxClient(t, testenv.ClosedAddr(t), 1)
	rs := redsync.New(goredis.NewPool(rdb), goredis.NewPool(down1), goredis.NewPool(down2))
	b, err := fencebridge.New(fencebridge.Redsync(rs, redsync.WithTries(1)), locks)
	require.NoError(t, err)
	_, err = b.Acquire(t.Context(), "jobs/e", time.Second)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	var node *redsync.RedisError
	require.ErrorAs(t, err, &node, "the node errors stay reachable: %v", err)
	assert.NotContains(t, err.Error(), "\n")
	assert.Contains(t, err.Error(), "; ", "both nodes' errors are in the message: %v", err)
	t.Log(err)
}
