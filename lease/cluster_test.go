package lease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestCluster runs the same API against a 3-master Redis Cluster: the keys
// of one lock share a hash slot, and names spread over all masters.
func TestCluster(t *testing.T) {
	cl := testenv.NewCluster(t, 3)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb, lease.WithBackoff(10*time.Second, 10*time.Second), lease.WithCounterTTL(0))
	require.NoError(t, err)
	ctx := t.Context()

	t.Run("names on every master", func(t *testing.T) {
		masters := map[string]bool{}
		for i := 0; i < 30; i++ {
			n := counting(t, rdb, fmt.Sprintf("cluster-%d", i))
			l, err := c.TryAcquire(ctx, n, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), l.Token().Seq)
			require.NoError(t, l.Refresh(ctx, time.Minute))
			info, err := c.Inspect(ctx, n)
			require.NoError(t, err)
			assert.Equal(t, l.Token(), info.Token)
			require.NoError(t, l.Release(ctx))
			_, err = c.Advance(ctx, n, 41)
			require.NoError(t, err)
			l, err = c.TryAcquire(ctx, n, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, uint64(42), l.Token().Seq)
			require.NoError(t, l.Release(ctx))

			node, err := rdb.MasterForKey(ctx, "fencelock:{"+n+"}")
			require.NoError(t, err)
			masters[node.Options().Addr] = true
		}
		assert.Len(t, masters, 3, "the names landed on all three masters")
	})

	t.Run("mutual exclusion", func(t *testing.T) {
		mutualExclusion(t, c, counting(t, rdb, "cluster-mutex"), 8, 20)
	})

	t.Run("waiter wakes on release", func(t *testing.T) {
		a, err := c.TryAcquire(ctx, "cluster-wake", time.Minute)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			l, err := c.Acquire(ctx, "cluster-wake", time.Minute)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		const ch = "fencelock:{cluster-wake}:release"
		require.Eventually(t, func() bool { // PUBSUB (SHARD)NUMSUB counts one node's clients
			var n atomic.Int64
			err := rdb.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
				m, err := node.PubSubNumSub(ctx, ch).Result()
				n.Add(m[ch])
				if err != nil {
					return err
				}
				m, err = node.PubSubShardNumSub(ctx, ch).Result()
				n.Add(m[ch])
				return err
			})
			return err == nil && n.Load() > 0
		}, 5*time.Second, time.Millisecond)
		start := time.Now()
		require.NoError(t, a.Release(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 2*time.Second, "woken by the release, not the 10 s backoff")
		case <-time.After(8 * time.Second):
			t.Fatal("waiter not woken on the cluster")
		}
	})
}
