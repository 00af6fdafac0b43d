package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestUncontendedCallsGoInline: one caller's TryAcquire, Refresh, Release
// and uncontended Acquire, one after the other, send every command from
// the caller's goroutine, through the caller's client (its hook sees each),
// and start no sender goroutine.
func TestUncontendedCallsGoInline(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(testenv.NewRedis(t).Options())
	t.Cleanup(func() { rdb.Close() })
	h := &testenv.Goroutines{}
	rdb.AddHook(h)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := t.Context()
	me := testenv.GoroutineID()
	for i := range 20 {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("%s/%d", name(t), i), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Refresh(ctx, time.Minute))
		require.NoError(t, l.Release(ctx))
		l, err = c.Acquire(ctx, fmt.Sprintf("%s/w%d", name(t), i), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		require.Zero(t, lease.Senders(c), "call %d started a sender", i)
	}
	ids := h.Take()
	require.GreaterOrEqual(t, len(ids), 80, "the caller's hook saw the calls")
	for _, id := range ids {
		assert.Equal(t, me, id, "a command went out on goroutine %d, not the caller's", id)
	}
}
