package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// A *redis.Ring has no pub/sub that serves every channel: its waiters do
// without (they used to panic in go-redis' Ring.Subscribe) and get the
// lock by its holder's ttl or their backoff.
func TestRingWaiterWithoutPubSub(t *testing.T) {
	r := testenv.NewRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": r.Addr()}})
	t.Cleanup(func() { ring.Close() })
	c, err := lease.New(ring)
	require.NoError(t, err)
	ctx := t.Context()

	first, err := c.TryAcquire(ctx, "ring", 300*time.Millisecond)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "ring", time.Second)
		if err == nil {
			assert.Greater(t, l.Token().Seq, first.Token().Seq)
			err = l.Release(context.Background())
		}
		got <- err
	}()
	require.NoError(t, <-got, "the waiter got the lock once the first one's ttl ran out")
}
