package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestCleanupStopsOnceServerRefuses: TryAcquires whose replies a frozen
// Redis lost leave cleanups behind; once the server is killed (it refuses
// connections), those cleanups stop at their next failed attempt instead of
// retrying until their bound (the ttl), so Close returns long before it.
// Before the reachability check got a context of its own, it dialled with
// the attempt's expired context, read the cancelled dial as "reachable",
// and Close waited for the whole ttl.
func TestCleanupStopsOnceServerRefuses(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	t.Cleanup(func() { _ = r.Resume() })
	c, err := lease.New(readmeClient(t, r.Addr())) // the README's setup
	require.NoError(t, err)
	const ttl = 20 * time.Second
	warm, err := c.TryAcquire(t.Context(), name(t), ttl)
	require.NoError(t, err)
	require.NoError(t, warm.Release(t.Context()))

	require.NoError(t, r.Pause())
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
			defer cancel()
			_, err := c.TryAcquire(ctx, name(t), ttl)
			require.ErrorIs(t, err, lease.ErrNotAcquired)
		})
	}
	wg.Wait()
	require.NoError(t, r.Kill())

	// The cleanups end at their next attempt (at most releaseTimeout, 1s,
	// plus a dial): a quarter of the ttl leaves room for a loaded machine.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), ttl/4)
	defer cancel()
	require.NoError(t, c.Close(ctx), "the cleanups go on although the server refuses connections")
	t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
}
