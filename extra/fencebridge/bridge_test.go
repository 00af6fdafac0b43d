package fencebridge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/extra/fencebridge"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// The peer libraries' adapters are tested in their own modules
// (redsyncbridge, redislockbridge, internal/peertest); here the old lock is
// the one many fleets wrote themselves, on real Redis: SET NX PX, and a
// compare-and-pexpire and compare-and-delete.

var errTaken = errors.New("raw: taken")

type rawOld struct {
	rdb    *redis.Client
	expiry time.Duration
}

func (o rawOld) Lock(ctx context.Context, name string) (fencebridge.OldLock, error) {
	v := uuid.NewString()
	start := time.Now()
	ok, err := o.rdb.SetNX(ctx, name, v, o.expiry).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errTaken
	}
	return &rawLock{o: o, name: name, value: v, until: start.Add(o.expiry)}, nil
}

type rawLock struct {
	o           rawOld
	name, value string
	mu          sync.Mutex // Until is read while a keep-alive refreshes
	until       time.Time
}

var (
	rawRefresh = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end return 0`)
	rawRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)
)

func (l *rawLock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *rawLock) Refresh(ctx context.Context) error {
	start := time.Now()
	n, err := rawRefresh.Run(ctx, l.o.rdb, []string{l.name}, l.value, l.o.expiry.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return fencebridge.ErrOldNotHeld
	}
	l.mu.Lock()
	l.until = start.Add(l.o.expiry)
	l.mu.Unlock()
	return nil
}

func (l *rawLock) Unlock(ctx context.Context) error {
	n, err := rawRelease.Run(ctx, l.o.rdb, []string{l.name}, l.value).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return fencebridge.ErrOldNotHeld
	}
	return nil
}

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

func newBridge(t *testing.T, rdb *redis.Client, locks *lease.Client, expiry time.Duration) *fencebridge.Bridge {
	t.Helper()
	b, err := fencebridge.New(rawOld{rdb: rdb, expiry: expiry}, locks)
	require.NoError(t, err)
	return b
}

// held is what both a *lease.Lease and a *fencebridge.Lock do: code
// written against it takes either, with no glue.
type held interface {
	Name() string
	Token() fence.Token
	Context() context.Context
	Done() <-chan struct{}
	Err() error
	Held() bool
	Deadline() time.Time
	Refresh(ctx context.Context, ttl time.Duration) error
	Reissue(ctx context.Context, floor uint64) (fence.Token, error)
	Release(ctx context.Context) error
}

var (
	_ held = (*lease.Lease)(nil)
	_ held = (*fencebridge.Lock)(nil)
)

// TestTheLeaseShape: one function written for a lease serves a bridge
// lock: refresh, token, release, and the errors it checks.
func TestTheLeaseShape(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	work := func(l held) {
		require.True(t, l.Held())
		require.NoError(t, l.Token().Validate())
		require.NoError(t, l.Refresh(ctx, time.Minute))
		require.NoError(t, l.Release(ctx))
		assert.ErrorIs(t, l.Err(), lease.ErrReleased)
		assert.ErrorIs(t, context.Cause(l.Context()), lease.ErrReleased)
		assert.False(t, l.Held())
		assert.ErrorIs(t, l.Refresh(ctx, time.Minute), lease.ErrReleased)
		assert.NoError(t, l.Release(ctx), "a second release is a no-op")
	}
	l, err := locks.Acquire(ctx, "shape/lease", time.Minute)
	require.NoError(t, err)
	work(l)
	bl, err := newBridge(t, rdb, locks, time.Minute).Acquire(ctx, "shape/bridge", time.Minute)
	require.NoError(t, err)
	work(bl)
}

func TestNewRejectsNil(t *testing.T) {
	rdb, locks := setup(t)
	_, err := fencebridge.New(nil, locks)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = fencebridge.New(rawOld{rdb: rdb}, nil)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	var b *fencebridge.Bridge
	_, err = b.Acquire(t.Context(), "x", time.Second)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	var l *fencebridge.Lock
	assert.ErrorIs(t, l.Release(t.Context()), fencebridge.ErrInvalid)
	assert.ErrorIs(t, l.Refresh(t.Context(), time.Second), fencebridge.ErrInvalid)
	_, err = l.Reissue(t.Context(), 1)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
	assert.NotPanics(t, func() {
		assert.ErrorIs(t, l.Err(), lease.ErrInvalid, "a nil Lock is as a nil *lease.Lease")
		assert.ErrorIs(t, context.Cause(l.Context()), lease.ErrInvalid)
		<-l.Done()
		assert.False(t, l.Held())
		assert.Zero(t, l.Token())
		assert.Zero(t, l.Deadline())
		assert.Empty(t, l.Name())
	})
}

// TestBadInputTakesNothing: a name, ttl or option that fencelock refuses
// is refused before the old lock is taken.
func TestBadInputTakesNothing(t *testing.T) {
	rdb, locks := setup(t)
	b := newBridge(t, rdb, locks, 8*time.Second)
	for name, ttl := range map[string]time.Duration{"user:{42}": time.Second, "": time.Second, "ok": time.Microsecond} {
		_, err := b.Acquire(t.Context(), name, ttl)
		require.ErrorIs(t, err, fencebridge.ErrInvalid, "%q %v", name, ttl)
		n, err := rdb.DBSize(t.Context()).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no key written for %q %v", name, ttl)
	}
	for _, interval := range []time.Duration{time.Millisecond, time.Second} {
		_, err := b.Acquire(t.Context(), "ok", time.Second, fencebridge.WithKeepAlive(interval))
		assert.ErrorIs(t, err, fencebridge.ErrInvalid, "keep-alive every %v", interval)
		assert.Zero(t, rdb.DBSize(t.Context()).Val(), "no key written for keep-alive every %v", interval)
	}
	_, err := b.Acquire(t.Context(), "ok", time.Second, nil)
	assert.ErrorIs(t, err, fencebridge.ErrInvalid)
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
	l, err := newBridge(t, rdb, locks, 8*time.Second).Acquire(ctx, "reports/nightly", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "reports/nightly", l.Name())
	_, err = rdb.Get(ctx, "reports/nightly").Result()
	require.NoError(t, err, "the old key is held")
	info, err := locks.Inspect(ctx, "reports/nightly")
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token, "fencelock's key is held")
	assert.WithinDuration(t, time.Now().Add(8*time.Second), l.Deadline(), time.Second,
		"the deadline is the old lock's, the earlier of the two")

	require.NoError(t, l.Release(ctx))
	assert.ErrorIs(t, l.Err(), lease.ErrReleased, "the lock ends on release")
	_, err = rdb.Get(ctx, "reports/nightly").Result()
	assert.ErrorIs(t, err, redis.Nil, "the old key is gone")
	info, err = locks.Inspect(ctx, "reports/nightly")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lock is free")
}

// TestNewHolderExcludesBridge: while a fencelock-only process holds the
// name, the bridge waits no longer than its old lock lasts, then gives the
// old lock back, so that old processes are not blocked for nothing.
func TestNewHolderExcludesBridge(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	hold, err := locks.Acquire(ctx, "jobs/c", time.Minute)
	require.NoError(t, err)

	_, err = newBridge(t, rdb, locks, 300*time.Millisecond).Acquire(ctx, "jobs/c", time.Minute)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the wait ended with the old lock's validity")
	assert.NotContains(t, err.Error(), "\n", "one line")
	_, err = rdb.Get(ctx, "jobs/c").Result()
	assert.ErrorIs(t, err, redis.Nil, "the old lock was given back")
	info, err := locks.Inspect(ctx, "jobs/c")
	require.NoError(t, err)
	assert.Equal(t, hold.Token(), info.Token, "the fencelock holder keeps its lock")
	require.NoError(t, hold.Release(ctx))
}

// TestEndsWithTheOldLock: without keep-alive the lock ends at the old
// lock's deadline when that comes first, though fencelock's lease lasts.
func TestEndsWithTheOldLock(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	l, err := newBridge(t, rdb, locks, 200*time.Millisecond).Acquire(ctx, "jobs/d", time.Minute)
	require.NoError(t, err)
	assert.True(t, l.Deadline().Before(time.Now().Add(200*time.Millisecond)))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock outlived the old lock")
	}
	assert.ErrorIs(t, l.Err(), fencebridge.ErrLost)
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
	assert.ErrorIs(t, context.Cause(l.Context()), lease.ErrLost)
	assert.False(t, l.Held())
	// The local deadline comes first; Redis drops the key a little later.
	require.Eventually(t, func() bool { return rdb.Exists(ctx, "jobs/d").Val() == 0 }, 5*time.Second, 10*time.Millisecond)
	err = l.Release(ctx)
	assert.ErrorIs(t, err, fencebridge.ErrOldNotHeld, "the old lock had expired")
	info, err := locks.Inspect(ctx, "jobs/d")
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "fencelock's lease was released all the same")
}

// TestKeepAliveKeepsBoth: with keep-alive, a lock whose old lock lasts
// 300ms is held for many times that, both keys with it; without, it ends
// at 300ms.
func TestKeepAliveKeepsBoth(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	b := newBridge(t, rdb, locks, 300*time.Millisecond)
	kept, err := b.Acquire(ctx, "jobs/kept", 300*time.Millisecond, fencebridge.WithKeepAlive(0))
	require.NoError(t, err)
	plain, err := b.Acquire(ctx, "jobs/plain", 300*time.Millisecond)
	require.NoError(t, err)
	first := kept.Deadline()

	time.Sleep(1500 * time.Millisecond)
	assert.ErrorIs(t, plain.Err(), lease.ErrLost, "without keep-alive the lock ended")
	require.NoError(t, kept.Err(), "with keep-alive the lock lasts")
	assert.True(t, kept.Held())
	assert.True(t, kept.Deadline().After(first.Add(time.Second)), "the deadline moved")
	assert.EqualValues(t, 1, rdb.Exists(ctx, "jobs/kept").Val(), "the old key is kept")
	info, err := locks.Inspect(ctx, "jobs/kept")
	require.NoError(t, err)
	assert.Equal(t, kept.Token(), info.Token, "fencelock's key is kept")

	require.NoError(t, kept.Release(ctx))
	assert.ErrorIs(t, kept.Err(), lease.ErrReleased)
	assert.Zero(t, rdb.Exists(ctx, "jobs/kept").Val())
}

// TestKeepAliveFindsTheOldLockGone: the old lock deleted behind the
// holder's back (an operator, an eviction): the next refresh ends the lock.
func TestKeepAliveFindsTheOldLockGone(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	l, err := newBridge(t, rdb, locks, time.Minute).Acquire(ctx, "jobs/gone", time.Minute, fencebridge.WithKeepAlive(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, "jobs/gone").Err())
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the keep-alive did not notice")
	}
	assert.ErrorIs(t, l.Err(), fencebridge.ErrLost)
	assert.ErrorIs(t, l.Err(), fencebridge.ErrOldNotHeld)
	assert.NotContains(t, l.Err().Error(), "\n")
	_ = l.Release(ctx)
}

// TestRefreshMovesTheDeadline: Refresh extends both locks.
func TestRefreshMovesTheDeadline(t *testing.T) {
	rdb, locks := setup(t)
	ctx := t.Context()
	l, err := newBridge(t, rdb, locks, 2*time.Second).Acquire(ctx, "jobs/r", 2*time.Second)
	require.NoError(t, err)
	first := l.Deadline()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, l.Refresh(ctx, 2*time.Second))
	assert.True(t, l.Deadline().After(first.Add(100*time.Millisecond)), "%v then %v", first, l.Deadline())
	pttl, err := rdb.PTTL(ctx, "jobs/r").Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 1900*time.Millisecond, "the old key's ttl was reset")
	require.NoError(t, l.Release(ctx))
}

// TestFrozenRedisEndsWithTheContext: with Redis frozen (SIGSTOP), an
// acquire returns by its context's deadline, and its error wraps the
// context's as well as ErrNotAcquired, whatever the old library's own
// error for the timed-out call.
func TestFrozenRedisEndsWithTheContext(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	locks, err := lease.New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close(context.Background()) })
	b := newBridge(t, rdb, locks, time.Minute)
	require.NoError(t, rdb.Ping(t.Context()).Err()) // the connection is open
	require.NoError(t, r.Pause())
	t.Cleanup(func() { _ = r.Resume() })

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Acquire(ctx, "jobs/frozen", time.Minute)
	took := time.Since(start)
	require.ErrorIs(t, err, fencebridge.ErrNotAcquired)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotContains(t, err.Error(), "\n")
	assert.Less(t, took, 300*time.Millisecond+testenv.DeadlineMargin, "returned by its deadline")
	t.Log(err)
}
