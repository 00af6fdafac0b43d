package heal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

const lock = "accounts/7"

// guarded is one fenced write to v: check and write in one step.
func guarded(v *verifier.Memory, writes *int) func(context.Context, fence.Token) error {
	return func(ctx context.Context, tok fence.Token) error {
		return v.Do(ctx, lock, tok, func() error { *writes++; return nil })
	}
}

// useLock acquires lock n times and writes through v each time.
func useLock(t *testing.T, c *lease.Client, v *verifier.Memory, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		l, err := c.TryAcquire(t.Context(), lock, time.Minute)
		require.NoError(t, err)
		require.NoError(t, v.Claim(t.Context(), lock, l.Token()))
		require.NoError(t, l.Release(t.Context()))
	}
}

// liftAboveClock advances the lock's counter far above the Redis server's
// clock, as Advance does after the storage saw tokens of another deployment:
// the one case where losing the counter (restart without persistence,
// eviction) makes it go back (see the counter rule in package lease).
func liftAboveClock(t *testing.T, c *lease.Client) {
	t.Helper()
	_, err := c.Advance(t.Context(), lock, uint64(time.Now().UnixMicro())+1e10)
	require.NoError(t, err)
}

// healsAfterCounterLoss checks what must hold once the counter was lost:
// the next token is rejected (safe), heal.Write makes the write succeed, and
// later acquisitions need no healing.
func healsAfterCounterLoss(t *testing.T, c *lease.Client, v *verifier.Memory, highBefore uint64) {
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, lock, time.Minute)
	require.NoError(t, err)
	require.LessOrEqual(t, l.Token().Seq, highBefore, "the counter went backwards")

	writes := 0
	err = guarded(v, &writes)(ctx, l.Token())
	require.ErrorIs(t, err, verifier.ErrStale, "the verifier rejects the repeated Seq")
	assert.Zero(t, writes)

	require.NoError(t, heal.Write(ctx, l, guarded(v, &writes)), "healed without any manual step")
	assert.Equal(t, 1, writes)
	assert.Greater(t, l.Token().Seq, highBefore)
	seq, _ := v.Highest(lock)
	assert.Equal(t, l.Token().Seq, seq)
	require.NoError(t, l.Release(ctx))

	next, err := c.TryAcquire(ctx, lock, time.Minute)
	require.NoError(t, err)
	assert.NoError(t, guarded(v, &writes)(ctx, next.Token()), "the counter is past the storage again")
	require.NoError(t, next.Release(ctx))
}

func TestRestartWithoutPersistence(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	v := verifier.NewMemory()
	liftAboveClock(t, c)
	useLock(t, c, v, 5)
	high, _ := v.Highest(lock)

	require.NoError(t, r.Kill())
	require.NoError(t, r.Start(t.Context()))
	healsAfterCounterLoss(t, c, v, high)
}

func TestCounterEvicted(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	c, err := lease.New(rdb)
	require.NoError(t, err)
	v := verifier.NewMemory()
	liftAboveClock(t, c)
	useLock(t, c, v, 5)
	high, _ := v.Highest(lock)

	// Memory pressure: cap memory just above what is used, then fill it.
	used, err := rdb.MemoryUsage(ctx, "fencelock:{"+lock+"}:fence").Result()
	require.NoError(t, err)
	require.Positive(t, used)
	info, err := rdb.Info(ctx, "memory").Result()
	require.NoError(t, err)
	var usedMem string
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			usedMem = v
		}
	}
	require.NotEmpty(t, usedMem)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "4mb").Err())
	filler := strings.Repeat("x", 10_000)
	evicted := false
	for i := 0; i < 5000 && !evicted; i++ {
		require.NoError(t, rdb.Set(ctx, "filler:"+time.Now().Format(time.RFC3339Nano), filler, 0).Err())
		n, err := rdb.Exists(ctx, "fencelock:{"+lock+"}:fence").Result()
		require.NoError(t, err)
		evicted = n == 0
	}
	require.True(t, evicted, "the counter was evicted (used_memory was %s)", usedMem)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())

	healsAfterCounterLoss(t, c, v, high)
}

func TestNoHealForALostLease(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	c, err := lease.New(rdb, lease.WithDriftFactor(0))
	require.NoError(t, err)
	v := verifier.NewMemory()

	old, err := c.TryAcquire(ctx, lock, 30*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond) // old pauses past its ttl
	cur, err := c.TryAcquire(ctx, lock, time.Minute)
	require.NoError(t, err)
	writes := 0
	require.NoError(t, guarded(v, &writes)(ctx, cur.Token()))

	err = heal.Write(ctx, old, guarded(v, &writes))
	require.ErrorIs(t, err, verifier.ErrStale, "a deserved rejection stands")
	assert.Equal(t, 1, writes)
	assert.Equal(t, cur.Token().Seq, func() uint64 { s, _ := v.Highest(lock); return s }())

	// A rejection that keeps coming is bounded by the attempts.
	calls := 0
	always := func(ctx context.Context, tok fence.Token) error {
		calls++
		return &verifier.StaleError{Resource: lock, Token: tok, Highest: tok.Seq + 1000}
	}
	err = heal.Write(ctx, cur, always, heal.WithAttempts(2))
	require.ErrorIs(t, err, verifier.ErrStale)
	assert.Equal(t, 3, calls)

	// Other errors pass through untouched.
	boom := errors.New("disk full")
	err = heal.Write(ctx, cur, func(context.Context, fence.Token) error { return boom })
	assert.Same(t, boom, err)
	var _ redis.UniversalClient = rdb
}

// TestWriteNilInputs: nil and typed-nil input is an error wrapping
// ErrInvalid (and lease.ErrInvalid), never a panic, and write is not called.
func TestWriteNilInputs(t *testing.T) {
	called := false
	write := func(context.Context, fence.Token) error { called = true; return nil }
	var typed *lease.Lease
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), lock, time.Minute)
	require.NoError(t, err)
	var nilCtx context.Context
	for name, err := range map[string]error{
		"nil lease":        heal.Write(t.Context(), nil, write),
		"typed nil lease":  heal.Write(t.Context(), typed, write),
		"nil write":        heal.Write(t.Context(), l, nil),
		"nil context":      heal.Write(nilCtx, l, write),
		"nil option":       heal.Write(t.Context(), l, write, nil),
		"negative retries": heal.Write(t.Context(), l, write, heal.WithAttempts(-1)),
	} {
		assert.ErrorIs(t, err, heal.ErrInvalid, name)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
	}
	assert.False(t, called)
}

// A token of another lock than the resource's is not healed: no advance of
// the lease's counter would make it acceptable, so heal.Write returns the
// *verifier.ForeignError at once and leaves the counter alone.
func TestForeignIsNotHealed(t *testing.T) {
	ctx := t.Context()
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	v := verifier.NewMemory()
	require.NoError(t, v.Claim(ctx, "orders/17", fence.Token{Key: "orders/17", Seq: 1, Holder: "h"}))

	l, err := c.TryAcquire(ctx, lock, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { l.Release(context.Background()) })
	before := l.Token()
	calls := 0
	err = heal.Write(ctx, l, func(ctx context.Context, tok fence.Token) error {
		calls++
		return v.Claim(ctx, "orders/17", tok)
	})
	require.ErrorIs(t, err, verifier.ErrForeign)
	assert.Equal(t, 1, calls, "no retry")
	assert.Equal(t, before, l.Token(), "no reissue")
	info, err := c.Inspect(ctx, lock)
	require.NoError(t, err)
	assert.Equal(t, before.Seq, info.LastSeq, "the counter was not advanced")
}
