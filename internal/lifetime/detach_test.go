package lifetime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/lifetime"
)

// failing returns a cleanup that fails its first `fails` attempts and then
// succeeds, and the count of its attempts.
func failing(fails int64) (func(context.Context) error, *atomic.Int64) {
	var n atomic.Int64
	return func(context.Context) error {
		if n.Add(1) <= fails {
			return errBoom
		}
		return nil
	}, &n
}

type ctxKey struct{}

// ---- Detach ----

func TestDetachReturnsFirstErrorAndRetries(t *testing.T) {
	cleanup, n := failing(2)
	err := lifetime.Detach(t.Context(), time.Second, waitFor, cleanup)
	require.ErrorIs(t, err, errBoom, "the first attempt's error")
	require.Eventually(t, func() bool { return n.Load() == 3 }, waitFor, tick, "retried until success")
	time.Sleep(100 * time.Millisecond)
	assert.EqualValues(t, 3, n.Load(), "no attempt after a success")
}

func TestDetachSuccessNoRetry(t *testing.T) {
	cleanup, n := failing(0)
	require.NoError(t, lifetime.Detach(t.Context(), time.Second, waitFor, cleanup))
	assert.EqualValues(t, 1, n.Load())
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 1, n.Load())
}

func TestDetachEndedCtxReturnsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	cancel()
	unblock := make(chan struct{})
	var n atomic.Int64
	var attemptCtxErr, value atomic.Value
	cleanup := func(actx context.Context) error {
		if n.Add(1) == 1 {
			attemptCtxErr.Store(fmt.Sprint(actx.Err())) // <nil>: the attempt has a context of its own
			value.Store(actx.Value(ctxKey{}))
			<-unblock
			return errBoom
		}
		return nil
	}
	returned := make(chan error, 1)
	go func() { returned <- lifetime.Detach(ctx, time.Minute, waitFor, cleanup) }()
	select {
	case err := <-returned:
		assert.NoError(t, err, "nil once ctx ended")
	case <-time.After(waitFor):
		t.Fatal("Detach waited for its cleanup after ctx ended")
	}
	close(unblock)
	require.Eventually(t, func() bool { return n.Load() == 2 }, waitFor, tick, "the cleanup still runs and retries")
	assert.Equal(t, "<nil>", attemptCtxErr.Load())
	assert.Equal(t, "v", value.Load(), "the attempt keeps ctx's values")
}

func TestDetachCtxEndsDuringFirstAttempt(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	defer close(unblock)
	ctx, cancel := context.WithCancel(t.Context())
	returned := make(chan error, 1)
	go func() {
		var n atomic.Int64
		returned <- lifetime.Detach(ctx, time.Minute, waitFor, func(context.Context) error {
			if n.Add(1) > 1 {
				return nil
			}
			close(entered)
			<-unblock
			return errBoom
		})
	}()
	<-entered
	select {
	case err := <-returned:
		t.Fatalf("returned %v before ctx ended", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	assert.NoError(t, <-returned)
}

func TestDetachAttemptBounds(t *testing.T) {
	// Each attempt is bounded by attempt, and none beyond the overall bound.
	var p lifetime.Pending
	check := func(limit time.Duration, fails int64) func(context.Context) error {
		var n atomic.Int64
		return func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			assert.True(t, ok, "an attempt has a deadline")
			assert.LessOrEqual(t, time.Until(d), limit)
			if n.Add(1) <= fails {
				return errBoom
			}
			return nil
		}
	}
	_ = p.Detach(t.Context(), 30*time.Millisecond, waitFor, check(30*time.Millisecond, 2))
	_ = p.Detach(t.Context(), time.Hour, 100*time.Millisecond, check(100*time.Millisecond, 2))
	require.NoError(t, p.Wait(t.Context()))
}

func TestDetachGivesUpAtBound(t *testing.T) {
	var p lifetime.Pending
	var n atomic.Int64
	err := p.Detach(t.Context(), time.Second, 150*time.Millisecond, func(context.Context) error {
		n.Add(1)
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	require.NoError(t, p.Wait(ctx), "the retries end once the bound has passed")
	got := n.Load()
	assert.GreaterOrEqual(t, got, int64(2), "retried")
	assert.LessOrEqual(t, got, int64(10), "with backoff")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, got, n.Load(), "nothing after the end")
}

// ---- Pending ----

func TestPendingIdle(t *testing.T) {
	var p lifetime.Pending
	assert.NoError(t, p.Wait(t.Context()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, p.Wait(ctx), "nothing pending: nil even for an ended ctx")
}

func TestPendingWaitsForRetries(t *testing.T) {
	var p lifetime.Pending
	var n atomic.Int64
	err := p.Detach(t.Context(), time.Second, waitFor, func(context.Context) error {
		if n.Add(1) <= 2 {
			return errBoom
		}
		return nil
	})
	require.ErrorIs(t, err, errBoom)
	require.NoError(t, p.Wait(t.Context()))
	assert.EqualValues(t, 3, n.Load(), "Wait returned after the last retry")
}

func TestPendingWaitBlocksUntilDone(t *testing.T) {
	var p lifetime.Pending
	unblock := make(chan struct{})
	var finished atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, p.Detach(ctx, time.Minute, waitFor, func(context.Context) error {
		<-unblock
		finished.Store(true)
		return nil
	}), "ctx ended: nil at once")

	waited := make(chan error, 2)
	for range 2 {
		go func() { waited <- p.Wait(t.Context()) }()
	}
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v with a cleanup running", err)
	case <-time.After(30 * time.Millisecond):
	}
	close(unblock)
	for range 2 {
		require.NoError(t, <-waited)
	}
	assert.True(t, finished.Load())
}

func TestPendingWaitCtxEnds(t *testing.T) {
	var p lifetime.Pending
	unblock := make(chan struct{})
	bg, cancelBg := context.WithCancel(context.Background())
	cancelBg()
	_ = p.Detach(bg, time.Minute, waitFor, func(context.Context) error {
		<-unblock
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, p.Wait(ctx), context.DeadlineExceeded)
	cctx, cancel2 := context.WithCancel(t.Context())
	cancel2()
	assert.ErrorIs(t, p.Wait(cctx), context.Canceled)

	close(unblock)
	assert.NoError(t, p.Wait(t.Context()), "and later waits see the end")
}

func TestPendingReusable(t *testing.T) {
	var p lifetime.Pending
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	for round := range 3 {
		unblock := make(chan struct{})
		var done atomic.Bool
		_ = p.Detach(dead, time.Minute, waitFor, func(context.Context) error {
			<-unblock
			done.Store(true)
			return nil
		})
		short, cancelShort := context.WithTimeout(t.Context(), 10*time.Millisecond)
		assert.ErrorIs(t, p.Wait(short), context.DeadlineExceeded, "round %d: waits for the new cleanup", round)
		cancelShort()
		close(unblock)
		require.NoError(t, p.Wait(t.Context()))
		assert.True(t, done.Load())
		assert.NoError(t, p.Wait(dead), "idle again")
	}
}

func TestPendingConcurrent(t *testing.T) {
	var p lifetime.Pending
	const n = 64
	var started, finished atomic.Int64
	dead, cancel := context.WithCancel(context.Background())
	cancel()

	var detached sync.WaitGroup
	for i := range n {
		detached.Go(func() {
			ctx := t.Context()
			if i%2 == 0 {
				ctx = dead
			}
			var tries atomic.Int64
			_ = p.Detach(ctx, time.Second, waitFor, func(context.Context) error {
				if tries.Add(1) == 1 {
					started.Add(1)
				}
				time.Sleep(time.Duration(i%5) * time.Millisecond)
				if i%3 == 0 && tries.Load() == 1 {
					return errBoom // one retry
				}
				finished.Add(1)
				return nil
			})
		})
	}
	// Waits racing with the Detach calls: any result is fine, no race.
	var racing sync.WaitGroup
	for range 8 {
		racing.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Millisecond)
			defer cancel()
			_ = p.Wait(ctx)
		})
	}
	detached.Wait() // every Detach has been counted
	var waits sync.WaitGroup
	for range 8 {
		waits.Go(func() {
			assert.NoError(t, p.Wait(t.Context()))
			assert.EqualValues(t, n, finished.Load(), "Wait returned before every cleanup ended")
		})
	}
	waits.Wait()
	racing.Wait()
	assert.EqualValues(t, n, started.Load())
}
