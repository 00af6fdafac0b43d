package lease_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// goroutineID is the calling goroutine's id ("goroutine 18 [running]:").
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _ = bytes.CutPrefix(buf, []byte("goroutine "))
	id, _, _ := bytes.Cut(buf, []byte(" "))
	n, _ := strconv.ParseUint(string(id), 10, 64)
	return n
}

// onGoroutine is a hook of the caller's client that records the goroutine
// each command and pipeline goes out on.
type onGoroutine struct {
	mu  sync.Mutex
	ids []uint64
}

func (h *onGoroutine) note() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = append(h.ids, goroutineID())
}

func (h *onGoroutine) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *onGoroutine) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note()
		return next(ctx, cmd)
	}
}

func (h *onGoroutine) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.note()
		return next(ctx, cmds)
	}
}

// TestUncontendedCallsGoInline: one caller's TryAcquire, Refresh, Release
// and uncontended Acquire, one after the other, send every command from
// the caller's goroutine, through the caller's client (its hook sees each),
// and start no sender goroutine.
func TestUncontendedCallsGoInline(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(testenv.NewRedis(t).Options())
	t.Cleanup(func() { rdb.Close() })
	h := &onGoroutine{}
	rdb.AddHook(h)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := t.Context()
	me := goroutineID()
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
	h.mu.Lock()
	defer h.mu.Unlock()
	require.GreaterOrEqual(t, len(h.ids), 80, "the caller's hook saw the calls")
	for _, id := range h.ids {
		assert.Equal(t, me, id, "a command went out on goroutine %d, not the caller's", id)
	}
}
