package redislockbridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/extra/fencebridge"
	"github.com/fencelock/fencelock/extra/fencebridge/redislockbridge"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

func setup(t *testing.T) (*redis.Client, *lease.Client) {
	t.Helper()
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	locks, err := lease.New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close(context.Background()) })
	return rdb, locks
}

func TestBadInput(t *testing.T) {
	rdb, locks := setup(t)
	for _, old := range []fencebridge.Old{redislockbridge.New(nil, time.Second, nil), redislockbridge.New(redislock.New(rdb), 0, nil)} {
		b, err := fencebridge.New(old, locks)
		require.NoError(t, err)
		_, err = b.Acquire(t.Context(), "x", time.Second)
		assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	}
}

// TestOldHolderExcludesBridge: while an old process (redislock) holds the
// name, the bridge takes neither lock.
func TestOldHolderExcludesBridge(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	rl := redislock.New(rdb)
	held, err := rl.Obtain(ctx, "jobs/b", time.Minute, nil)
	require.NoError(t, err)
	b, err := fencebridge.New(redislockbridge.New(rl, time.Minute, nil), locks)
	require.NoError(t, err)
	_, err = b.Acquire(ctx, "jobs/b", time.Minute)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	assert.ErrorIs(t, err, redislock.ErrNotObtained)
	info, err := locks.Inspect(ctx, "jobs/b")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lock was not taken")
	require.NoError(t, held.Release(ctx))
}

// TestEndsWithTheOldLock: the lock ends at redislock's deadline, and its
// release reports redislock's ErrLockNotHeld.
func TestEndsWithTheOldLock(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	b, err := fencebridge.New(redislockbridge.New(redislock.New(rdb), 200*time.Millisecond, nil), locks)
	require.NoError(t, err)
	l, err := b.Acquire(ctx, "jobs/d", time.Minute)
	require.NoError(t, err)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock outlived the old lock")
	}
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "jobs/d").Val() == 0 }, 5*time.Second, 10*time.Millisecond)
	err = l.Release(ctx)
	assert.ErrorIs(t, err, fencebridge.ErrOldNotHeld)
	assert.ErrorIs(t, err, redislock.ErrLockNotHeld)
}

// TestKeepAlive: redislock's lock of 300ms is refreshed with fencelock's
// lease, and a redislock process cannot take it meanwhile.
func TestKeepAlive(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	rl := redislock.New(rdb)
	b, err := fencebridge.New(redislockbridge.New(rl, 300*time.Millisecond, nil), locks)
	require.NoError(t, err)
	l, err := b.Acquire(ctx, "jobs/k", 300*time.Millisecond, fencebridge.WithKeepAlive(0))
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, l.Err())
	_, err = rl.Obtain(ctx, "jobs/k", time.Second, nil)
	assert.ErrorIs(t, err, redislock.ErrNotObtained, "an old process finds the lock held")
	require.NoError(t, l.Release(ctx))
	_, err = rl.Obtain(ctx, "jobs/k", time.Second, nil)
	assert.NoError(t, err, "and free after release")
}
