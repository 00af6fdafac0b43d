package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// naming counts the commands, direct or in pipelines, that name key.
type naming struct {
	key string
	n   atomic.Int64
}

func (h *naming) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok && strings.Contains(s, h.key) {
				h.n.Add(1)
			}
		}
	}
}

func (h *naming) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *naming) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}
func (h *naming) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds...); return next(ctx, cmds) }
}

// TestLeftCallerIsOnNoNode: with every node frozen (SIGSTOP) and the
// calls in flight to each node at their bound (a direct call and a
// pipeline, both waiting on the frozen node), a TryAcquire whose context
// ends while its calls are still queued returns at its deadline; none of
// its calls ever goes out (the caller's own hooks see no command naming its
// lock, not even a release), and once the nodes resume its lock is on no
// node.
func TestLeftCallerIsOnNoNode(t *testing.T) {
	t.Parallel()
	nodes, rdbs := ownNodes(t, 3)
	left := name(t) + "/left"
	hooks := make([]*naming, len(rdbs))
	for i, rdb := range rdbs {
		hooks[i] = &naming{key: left}
		rdb.AddHook(hooks[i])
	}
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(5*time.Second))
	l, err := c.TryAcquire(t.Context(), name(t)+"/warm", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))

	for _, n := range nodes {
		require.NoError(t, n.Pause())
		t.Cleanup(func() { _ = n.Resume() })
	}
	var busy sync.WaitGroup
	for i := range 2 { // a direct call, then a pipeline, on every node
		busy.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			// It gets its lock or not, depending on when the nodes resume.
			_, _ = c.TryAcquire(ctx, fmt.Sprintf("%s/busy%d", name(t), i), time.Minute)
		})
		time.Sleep(200 * time.Millisecond) // lets it reach every node before the next
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = c.TryAcquire(ctx, left, time.Minute)
	cancel()
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	for _, n := range nodes {
		require.NoError(t, n.Resume())
	}
	busy.Wait()
	require.NoError(t, c.Close(t.Context()))
	for i := range rdbs {
		assert.Zero(t, hooks[i].n.Load(), "node %d: a command naming the left lock went out", i)
	}
	for i, rdb := range rdbs {
		n, err := rdb.Exists(t.Context(), "fencelock:"+left).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "node %d holds the left lock", i)
	}
	info, err := c.Inspect(t.Context(), left)
	require.NoError(t, err)
	assert.Empty(t, info.Holder, "the left lock is on no node")
}
