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
)

// TestFairQueueFullOfDead: the fair queue is full of waiters that died
// (protocol.MaxQueue tickets, expired, ahead of everyone). Live waiters
// still queue, and once the holder releases they get the lock in the
// order they queued: the release and their tries drop the dead a few per
// call (protocol.MaxDrop).
func TestFairQueueFullOfDead(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n := name(t)
	k := protocol.KeysFor("fencelock:", n)
	first, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)

	dead := protocol.Ticket{Expires: time.Now().Add(-time.Minute), TTL: time.Second, Attempt: 1}.String()
	zs := make([]redis.Z, 0, protocol.MaxQueue)
	hs := make([]any, 0, 2*protocol.MaxQueue)
	for i := range protocol.MaxQueue {
		id := fmt.Sprintf("dead-%d", i)
		zs = append(zs, redis.Z{Score: float64(i + 1), Member: id})
		hs = append(hs, id, dead)
	}
	require.NoError(t, shared.ZAdd(ctx, k.Queue, zs...).Err())
	require.NoError(t, shared.HSet(ctx, k.Tickets, hs...).Err())
	require.NoError(t, shared.Set(ctx, k.Waiting, "1", time.Minute).Err())

	// live counts the live waiters in the queue.
	live := func() int {
		ids, err := shared.ZRange(ctx, k.Queue, 0, -1).Result()
		require.NoError(t, err)
		n := 0
		for _, id := range ids {
			if !strings.HasPrefix(id, "dead-") {
				n++
			}
		}
		return n
	}
	const waiters = 4
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			l, err := c.Acquire(ctx, n, time.Minute)
			if !assert.NoError(t, err) {
				return
			}
			order <- i
			assert.NoError(t, l.Release(ctx))
		})
		require.Eventually(t, func() bool { return live() == i+1 }, 10*time.Second, 2*time.Millisecond,
			"waiter %d queued", i)
	}
	require.NoError(t, first.Release(ctx))
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	assert.Equal(t, []int{0, 1, 2, 3}, got, "served in the order they queued")
}
