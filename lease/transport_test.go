package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// readmeClient is the README's client setup: ContextTimeoutEnabled only,
// go-redis's retries as they come.
func readmeClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestTinyDeadlinesLeaveNoLock: one-at-a-time TryAcquires of free locks
// whose contexts end after 20-200µs, on a healthy Redis: whatever became of
// each call (never sent, sent and run, its reply lost), once Close returned
// no lock is left taken. Before the one transport rule, about one in
// twenty was left for its whole ttl and Close returned nil.
func TestTinyDeadlinesLeaveNoLock(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			c, err := lease.New(readmeClient(t, r.Addr()), lease.WithFair(fair), lease.WithPrefix(fmt.Sprintf("tiny%v:", fair)))
			require.NoError(t, err)
			var names []string
			timedOut := 0
			for i := range 400 {
				n := fmt.Sprintf("%s/%d", name(t), i)
				names = append(names, n)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rand.IntN(180))*time.Microsecond)
				l, err := c.TryAcquire(ctx, n, 20*time.Second)
				cancel()
				if err == nil {
					require.NoError(t, l.Release(context.Background()))
					continue
				}
				require.ErrorIs(t, err, lease.ErrNotAcquired)
				timedOut++
			}
			t.Logf("%d of 400 tries ended by their deadline", timedOut)
			require.NoError(t, c.Close(context.Background()), "the cleanups end well before their ttl on a healthy server")
			check, err := lease.New(readmeClient(t, r.Addr()), lease.WithPrefix(fmt.Sprintf("tiny%v:", fair)))
			require.NoError(t, err)
			for _, n := range names {
				info, err := check.Inspect(context.Background(), n)
				require.NoError(t, err)
				assert.Empty(t, info.Holder, "%s is left taken for %v", n, info.TTL)
				assert.Zero(t, info.Queued, "%s has a ticket left", n)
			}
		})
	}
}

// TestCloseAfterOutageReturnsAtOnce: with the README's client setup, after
// the server is gone a TryAcquire with a 300ms deadline returns by it,
// naming the refused dial, starts no cleanup (the call surely did not
// run), and Close returns nil at once rather than retrying a release for
// the ttl.
func TestCloseAfterOutageReturnsAtOnce(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	c, err := lease.New(readmeClient(t, r.Addr()))
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), name(t), 20*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
	require.NoError(t, r.Kill())

	err = testenv.WithinDeadline(t, "TryAcquire", func(ctx context.Context) error {
		_, err := c.TryAcquire(ctx, name(t), 20*time.Second)
		return err
	})
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.Contains(t, err.Error(), "connection refused")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Close(ctx), "no cleanup runs for a call that was never sent")
}

// TestCloseKeepsItsBound: on a frozen server (SIGSTOP; its port still
// accepts connections), a TryAcquire that times out may have been sent, so
// its release goes on in the background; Close returns at its context's
// deadline with an error that says a cleanup was abandoned, not after the
// ttl.
func TestCloseKeepsItsBound(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	t.Cleanup(func() { _ = r.Resume() })
	c, err := lease.New(readmeClient(t, r.Addr()))
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), name(t), 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
	require.NoError(t, r.Pause())

	err = testenv.WithinDeadline(t, "TryAcquire", func(ctx context.Context) error {
		_, err := c.TryAcquire(ctx, name(t), 30*time.Second)
		return err
	})
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	err = testenv.WithinDeadline(t, "Close", c.Close)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, strings.Contains(err.Error(), "1 background cleanups abandoned"), "%v", err)
}

// TestCloseEndsTheSenders: a burst of tries batched by the client's
// transport leaves idle senders waiting for more; Close ends them before it
// returns, and a lease still held keeps working (its release goes out
// directly).
func TestCloseEndsTheSenders(t *testing.T) {
	c, err := lease.New(shared)
	require.NoError(t, err)
	held, err := c.TryAcquire(t.Context(), name(t)+"/held", time.Minute)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			l, err := c.TryAcquire(t.Context(), fmt.Sprintf("%s/%d", name(t), i), time.Minute)
			if assert.NoError(t, err) {
				assert.NoError(t, l.Release(t.Context()))
			}
		})
	}
	wg.Wait()
	assert.Positive(t, lease.Senders(c), "idle senders wait for more work")
	require.NoError(t, c.Close(t.Context()))
	assert.Zero(t, lease.Senders(c), "Close ended the senders")
	require.NoError(t, held.Release(t.Context()))
	assert.Zero(t, lease.Senders(c))
}
