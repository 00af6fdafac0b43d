package testenv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary, replica := NewReplicated(t)
	s := NewSentinel(t, primary, "mymaster")
	addr, err := s.MasterAddr(ctx)
	require.NoError(t, err)
	assert.Equal(t, primary.Addr(), addr)

	c := s.FailoverClient("mymaster")
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "before", 0).Err())
	v, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "before", v)
	// SENTINEL FAILOVER is not coordinated: make sure the replica has "k".
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		v, err := rc.Get(ctx, "k").Result()
		return err == nil && v == "before"
	}, 5*time.Second, 5*time.Millisecond)

	newMaster, err := s.Failover(ctx)
	require.NoError(t, err)
	assert.Equal(t, replica.Addr(), newMaster, "the only replica was promoted")

	// The client learns of the switch asynchronously (+switch-master); until
	// then the old primary, still a master for a moment, may answer.
	require.Eventually(t, func() bool {
		port, err := c.ConfigGet(ctx, "port").Result()
		return err == nil && port["port"] == replica.Addr()[len("127.0.0.1:"):]
	}, 5*time.Second, 20*time.Millisecond, "the failover client follows the new master")
	v, err = c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "before", v, "the new master has the replicated key")
	require.NoError(t, c.Set(ctx, "k", "after", 0).Err())

	// The sentinel turns the old primary into a replica of the new master.
	old := primary.Client()
	defer old.Close()
	require.Eventually(t, func() bool {
		v, err := old.Get(ctx, "k").Result()
		return err == nil && v == "after"
	}, 10*time.Second, 50*time.Millisecond, "the old primary rejoins as a replica")
	info, err := old.Info(ctx, "replication").Result()
	require.NoError(t, err)
	assert.Equal(t, "slave", infoField(info, "role"))
}
