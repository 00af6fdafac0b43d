package lease_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// One option set for both kinds: the shared options configure either, and
// an option of one kind only is refused by the other's New, by name.
func TestOptionsOfOneFamily(t *testing.T) {
	// Clients for ports nobody listens on: New does no I/O.
	var nodes []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, rdb)
	}
	shared := []lease.Option{
		lease.WithPrefix("p:"), lease.WithDriftFactor(0.02), lease.WithBackoff(time.Millisecond, time.Second),
		lease.WithClockFloor(true), lease.WithCounterTTL(time.Minute),
	}
	_, err := lease.New(nodes[0], shared...)
	require.NoError(t, err)
	_, err = redlock.New(nodes, shared...)
	require.NoError(t, err)

	for name, o := range map[string]lease.Option{
		"WithNodeTimeout":    redlock.WithNodeTimeout(time.Second),
		"WithQuorumFencing":  redlock.WithQuorumFencing(true),
		"WithForceNodeCount": redlock.WithForceNodeCount(),
		"WithWakeup":         redlock.WithWakeup(false),
	} {
		_, err := lease.New(nodes[0], o)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
		assert.ErrorContains(t, err, name)
	}
	for name, o := range map[string]lease.Option{
		"WithFair":       lease.WithFair(false),
		"WithReplicaAck": lease.WithReplicaAck(1, time.Second),
	} {
		_, err := redlock.New(nodes, o)
		assert.ErrorIs(t, err, redlock.ErrInvalid, name)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
		assert.ErrorContains(t, err, name)
	}

	// A bad shared option is each kind's ErrInvalid.
	_, err = redlock.New(nodes, lease.WithCounterTTL(-1))
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = redlock.New(nodes, nil)
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	_, err = lease.New(nodes[0], lease.WithHooks(nil))
	assert.ErrorIs(t, err, lease.ErrInvalid)
	assert.NotErrorIs(t, err, redlock.ErrInvalid)
}
