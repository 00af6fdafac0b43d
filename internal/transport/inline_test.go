package transport

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// TestLoneCallGoesInline: a call with nothing else in flight goes out on
// its caller's goroutine, through the caller's client (whose hook sees
// it), and starts no sender: script calls, Pipelined, an EVALSHA that
// falls back to EVAL after NOSCRIPT, and calls made while senders left by
// a burst sit idle. Only calls that overlap are batched.
func TestLoneCallGoesInline(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	w := &testenv.Goroutines{}
	rdb.AddHook(w)
	tr := NewTransport(rdb, true)
	t.Cleanup(func() { _ = tr.Close(context.Background()) })
	ctx := t.Context()

	lone := func(what string) {
		t.Helper()
		me := testenv.GoroutineID()
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
		ids := w.Take()
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
	w.Take()
	n, idle := tr.state()
	require.Positive(t, idle, "the burst left idle senders (%d)", n)
	me := testenv.GoroutineID()
	for range 20 {
		_, _, err := run(ctx, tr, echo, "ok", "x")
		require.NoError(t, err)
	}
	for _, id := range w.Take() {
		require.Equal(t, me, id, "with idle senders, a lone call still goes out on its caller's goroutine")
	}
	require.NoError(t, tr.Close(ctx))
	lone("after Close")
}
