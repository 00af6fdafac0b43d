package lease_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// clusterNames returns perMaster lock names on each master of the cluster,
// all in different hash slots, as a map from master address to names.
func clusterNames(t *testing.T, rdb *redis.ClusterClient, masters, perMaster int) map[string][]string {
	t.Helper()
	ctx := t.Context()
	byMaster := map[string][]string{}
	slots := map[int64]bool{}
	for i, full := 0, 0; full < masters; i++ {
		require.Less(t, i, 10000, "names for every master")
		n := fmt.Sprintf("%s-%d", t.Name(), i)
		key := protocol.KeysFor("fencelock:", n).Lock
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		node, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		addr := node.Options().Addr
		if slots[slot] || len(byMaster[addr]) == perMaster {
			continue
		}
		slots[slot] = true
		byMaster[addr] = append(byMaster[addr], n)
		if len(byMaster[addr]) == perMaster {
			full++
		}
	}
	return byMaster
}

// shardSubs returns PUBSUB SHARDNUMSUB and PUBSUB NUMSUB of lock n's
// channel on the master at addr.
func shardSubs(t *testing.T, rdb *redis.ClusterClient, addr, n string) (sharded, classic int64) {
	t.Helper()
	ch := protocol.KeysFor("fencelock:", n).Channel
	node := masterAt(t, rdb, addr)
	s, err := node.PubSubShardNumSub(t.Context(), ch).Result()
	require.NoError(t, err)
	c, err := node.PubSubNumSub(t.Context(), ch).Result()
	require.NoError(t, err)
	return s[ch], c[ch]
}

// masterAt returns the cluster client's client for the master at addr.
func masterAt(t *testing.T, rdb *redis.ClusterClient, addr string) *redis.Client {
	t.Helper()
	var found *redis.Client
	var mu sync.Mutex
	require.NoError(t, rdb.ForEachMaster(t.Context(), func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	}))
	require.NotNil(t, found, "master %s", addr)
	return found
}

// pubsubConns counts the pub/sub connections (classic or sharded) that the
// server at addr sees.
func pubsubConns(t *testing.T, rdb *redis.ClusterClient, addr string) int {
	t.Helper()
	list, err := masterAt(t, rdb, addr).Do(t.Context(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	require.NoError(t, err)
	return len(strings.Fields(strings.ReplaceAll(list, " ", "_")))
}

// TestClusterShardedPubSub: on a Redis 7 cluster, the waiters of one
// Client on locks in different slots and on every master listen with
// SSUBSCRIBE (PUBSUB SHARDNUMSUB counts one subscriber per channel, classic
// NUMSUB none) over one connection per master, and every waiter gets the
// lock: fair ones by handoff in queue order with growing tokens, unfair
// ones woken by the release (their backoff is an hour and the holders'
// ttl ten minutes, so nothing else can wake them in time).
func TestClusterShardedPubSub(t *testing.T) {
	cl := testenv.NewCluster(t, 3)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	const masters, perMaster, waiters = 3, 2, 4

	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			var wg sync.WaitGroup
			defer wg.Wait() // after cancel: no waiter outlives the test
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c, err := lease.New(rdb, lease.WithFair(fair), lease.WithBackoff(time.Hour, time.Hour))
			require.NoError(t, err)
			byMaster := clusterNames(t, rdb, masters, perMaster)

			type got struct {
				name string
				seq  uint64
			}
			order := make(chan got, masters*perMaster*waiters)
			var holders []*lease.Lease
			for _, names := range byMaster {
				for _, n := range names {
					h, err := c.TryAcquire(ctx, n, 10*time.Minute)
					require.NoError(t, err)
					holders = append(holders, h)
					for range waiters {
						wg.Go(func() {
							l, err := c.Acquire(ctx, n, 10*time.Minute)
							if !assert.NoError(t, err) {
								return
							}
							order <- got{n, l.Token().Seq}
							assert.NoError(t, l.Release(ctx))
						})
					}
				}
			}
			for addr, names := range byMaster {
				for _, n := range names {
					require.Eventually(t, func() bool {
						s, _ := shardSubs(t, rdb, addr, n)
						return s == 1
					}, 10*time.Second, 2*time.Millisecond, "%s: one sharded subscriber on %s", n, addr)
					_, classic := shardSubs(t, rdb, addr, n)
					assert.Zero(t, classic, "%s: no classic subscriber", n)
				}
				assert.Equal(t, 1, pubsubConns(t, rdb, addr), "one pub/sub connection on %s", addr)
			}
			if fair {
				for _, names := range byMaster {
					for _, n := range names {
						waitQueued(t, rdb, n, waiters)
					}
				}
			}

			for _, h := range holders {
				require.NoError(t, h.Release(ctx))
			}
			wg.Wait()
			close(order)
			last := map[string]uint64{}
			count := map[string]int{}
			for _, h := range holders {
				last[h.Token().Key] = h.Token().Seq
			}
			for g := range order {
				assert.Greater(t, g.seq, last[g.name], "%s: tokens grow in handoff order", g.name)
				last[g.name] = g.seq
				count[g.name]++
			}
			for _, names := range byMaster {
				for _, n := range names {
					assert.Equal(t, waiters, count[n], "%s: every waiter got the lock", n)
				}
			}
		})
	}
}

// TestClusterShardedResubscribe: when a master drops the client's sharded
// pub/sub connection while waiters wait on two slots of it, the client
// subscribes both channels again (go-redis's own resubscription sends them
// in one SSUBSCRIBE, which the cluster refuses across slots), and the next
// releases wake the waiters (their backoff is an hour).
func TestClusterShardedResubscribe(t *testing.T) {
	cl := testenv.NewCluster(t, 3)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := lease.New(rdb, lease.WithFair(false), lease.WithBackoff(time.Hour, time.Hour))
	require.NoError(t, err)
	var addr string
	var names []string
	for a, ns := range clusterNames(t, rdb, 3, 2) {
		addr, names = a, ns
		break
	}

	var holders []*lease.Lease
	got := make(chan error, len(names))
	for _, n := range names {
		h, err := c.TryAcquire(ctx, n, 10*time.Minute)
		require.NoError(t, err)
		holders = append(holders, h)
		go func() {
			l, err := c.Acquire(ctx, n, 10*time.Minute)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
	}
	subscribed := func() bool {
		for _, n := range names {
			if s, _ := shardSubs(t, rdb, addr, n); s != 1 {
				return false
			}
		}
		return true
	}
	require.Eventually(t, subscribed, 10*time.Second, 2*time.Millisecond, "both channels subscribed")
	node := masterAt(t, rdb, addr)
	killed, err := node.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), killed, "one pub/sub connection for both slots")
	require.Eventually(t, subscribed, 10*time.Second, 2*time.Millisecond, "both channels subscribed again")
	assert.Equal(t, 1, pubsubConns(t, rdb, addr), "still one pub/sub connection")

	for _, h := range holders {
		require.NoError(t, h.Release(ctx))
	}
	for range names {
		require.NoError(t, <-got, "the waiter got the lock by the release's message")
	}
}
