package lease_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestBoundedKeys: 100,000 distinct lock names acquired and released leave
// one key each (the counter) until the counter ttl runs out, then none; and
// a name taken again after its counter expired gets a token above its old
// ones (the counter starts again from the server's clock).
func TestBoundedKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 acquisitions")
	}
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	const counterTTL = 3 * time.Second
	c, err := lease.New(rdb, lease.WithCounterTTL(counterTTL))
	require.NoError(t, err)
	ctx := t.Context()

	const names, workers = 100_000, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < names; i += workers {
				l, err := c.TryAcquire(ctx, fmt.Sprintf("order/%d", i), time.Minute)
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	took := time.Since(start)
	keys, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	t.Logf("%d names acquired and released in %v: %d keys right after", names, took.Round(time.Millisecond), keys)
	assert.LessOrEqual(t, keys, int64(names), "at most the counters are left")
	assert.Positive(t, keys, "the counters live on for their ttl")

	old, err := c.Inspect(ctx, "order/7")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := rdb.DBSize(ctx).Result()
		return err == nil && n == 0
	}, counterTTL+10*time.Second, 100*time.Millisecond, "every key expired")
	t.Logf("0 keys %v after the last release", time.Since(start.Add(took)).Round(100*time.Millisecond))

	l, err := c.TryAcquire(ctx, "order/7", time.Minute)
	require.NoError(t, err)
	assert.Greater(t, l.Token().Seq, old.LastSeq, "the counter expired and started again above its old tokens")
	require.NoError(t, l.Release(ctx))
}
