package family

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// goid is the id of the calling goroutine, from its stack's first line
// ("goroutine 18 [running]:").
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _ = bytes.CutPrefix(buf, []byte("goroutine "))
	id, _, _ := bytes.Cut(buf, []byte(" "))
	n, _ := strconv.ParseUint(string(id), 10, 64)
	return n
}

// where is a hook of the caller's client that records the goroutine
// each command and pipeline goes out on.
type where struct {
	mu  sync.Mutex
	ids []uint64
}

func (w *where) note() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, goid())
}

func (w *where) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *where) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.note()
		return next(ctx, cmd)
	}
}

func (w *where) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		w.note()
		return next(ctx, cmds)
	}
}

// take returns the goroutines recorded since the last take.
func (w *where) take() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := w.ids
	w.ids = nil
	return ids
}

// TestLoneCallGoesInline: a call with nothing else in flight goes out on
// its caller's goroutine, through the caller's client (whose hook sees
// it), and starts no sender: script calls, Pipelined, an EVALSHA that
// falls back to EVAL after NOSCRIPT, and calls made while senders left by
// a burst sit idle. Only calls that overlap are batched.
func TestLoneCallGoesInline(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	w := &where{}
	rdb.AddHook(w)
	tr := NewTransport(rdb, true)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	ctx := t.Context()

	lone := func(what string) {
		t.Helper()
		me := goid()
		for i := range 20 {
			_, sent, err := run(ctx, tr, echo, "ok", "x")
			require.NoError(t, err, what)
			assert.Equal(t, Ran, sent, what)
			_, sent, err = Send(ctx, tr, func(ctx context.Context, c Conn) ([]redis.Cmder, error) {
				return c.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.Incr(ctx, "lone")
					p.Get(ctx, "lone")
					return nil
				})
			})
			require.NoError(t, err, what)
			assert.Equal(t, Ran, sent, what)
			if i == 10 {
				require.NoError(t, rdb.ScriptFlush(ctx).Err()) // the next run: NOSCRIPT, then EVAL
			}
			n, _ := tr.state()
			require.Zero(t, n, "%s: call %d left a sender or a call in flight", what, i)
		}
		ids := w.take()
		require.GreaterOrEqual(t, len(ids), 40, "%s: the caller's hook saw every call", what)
		for _, id := range ids {
			require.Equal(t, me, id, "%s: a lone call went out on goroutine %d, not its caller's (%d)", what, id, me)
		}
	}
	lone("no sender yet")

	// A burst: overlapping calls are batched by senders, which then wait
	// idle for more (senderIdle).
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			_, _, err := run(ctx, tr, echo, "ok", "burst")
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	w.take()
	n, idle := tr.state()
	require.Positive(t, idle, "the burst left idle senders (%d)", n)
	me := goid()
	for range 20 {
		_, _, err := run(ctx, tr, echo, "ok", "x")
		require.NoError(t, err)
	}
	for _, id := range w.take() {
		require.Equal(t, me, id, "with idle senders, a lone call still goes out on its caller's goroutine")
	}
	require.NoError(t, tr.Close(ctx))
	lone("after Close")
}
