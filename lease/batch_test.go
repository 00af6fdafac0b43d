package lease_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
)

// lostInPipeline slows every EVALSHA sent alone, so that the calls made
// meanwhile go out batched, and replaces the first EVALSHA reply in a
// pipeline with a timeout, as if that reply were lost on the way back.
type lostInPipeline struct {
	fired atomic.Bool
	key   atomic.Value // the lost acquire's lock key
}

func (h *lostInPipeline) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lostInPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			time.Sleep(20 * time.Millisecond)
		}
		return next(ctx, cmd)
	}
}
func (h *lostInPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Name() == "evalsha" && cmd.Err() == nil && h.fired.CompareAndSwap(false, true) {
				h.key.Store(cmd.Args()[3])
				cmd.SetErr(context.DeadlineExceeded)
			}
		}
		return err
	}
}

// TestLostReplyInBatchReleases: concurrent acquires go out batched; the one
// whose reply is lost in its pipeline fails with the timeout, and the lock
// its acquire took on the server is released in the background; the others
// got their own leases.
func TestLostReplyInBatchReleases(t *testing.T) {
	r, _ := ownRedis(t)
	rdb := r.Client()
	defer rdb.Close()
	ctx := t.Context()
	warm, err := lease.New(rdb, lease.WithCounterTTL(0))
	require.NoError(t, err)
	l, err := warm.TryAcquire(ctx, "warm", time.Second) // loads the acquire script
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	var h lostInPipeline
	rdb.AddHook(&h)
	c, err := lease.New(rdb, lease.WithCounterTTL(0))
	require.NoError(t, err)
	const n = 20
	names := make([]string, n)
	for i := range names {
		names[i] = counting(t, rdb, fmt.Sprintf("batched-%d", i))
	}
	leases := make([]*lease.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { leases[i], errs[i] = c.TryAcquire(ctx, names[i], time.Hour) })
	}
	wg.Wait()
	require.True(t, h.fired.Load(), "some acquires went out in a pipeline")
	lost := -1
	for i, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, -1, lost, "one reply was lost")
			lost = i
			continue
		}
		assert.Equal(t, uint64(1), leases[i].Token().Seq, names[i])
		require.NoError(t, leases[i].Release(ctx))
	}
	require.NotEqual(t, -1, lost, "an acquire failed")
	assert.Contains(t, h.key.Load(), "{"+names[lost]+"}", "the one whose reply was lost")
	require.NoError(t, c.Close(ctx), "the background release finished")

	info, err := warm.Inspect(ctx, names[lost])
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.LastSeq, "the lost acquire did run on the server")
	assert.Empty(t, info.Holder, "and its lock was released, not left for an hour")
	assert.Zero(t, info.Queued)
}
