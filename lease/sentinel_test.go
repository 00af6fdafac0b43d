package lease_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// TestSentinel: the durability options through a Sentinel failover client.
// Tokens keep growing across a Sentinel-driven failover (the counter was
// acknowledged by the replica, and the clock floor would lift it anyway),
// and replica acknowledgement fails cleanly while the new master has no
// replica, then succeeds again once Sentinel has turned the old primary
// into its replica.
func TestSentinel(t *testing.T) {
	ctx := t.Context()
	const master = "fencelock"
	primary, replica := testenv.NewReplicated(t)
	s := testenv.NewSentinel(t, primary, master)
	rdb := s.FailoverClient(master)
	t.Cleanup(func() { rdb.Close() })

	c, err := lease.New(rdb, lease.WithClockFloor(true), lease.WithCounterTTL(time.Hour),
		lease.WithReplicaAck(1, time.Second))
	require.NoError(t, err)
	n := name(t)
	counter := "fencelock:{" + n + "}:fence"

	var highest uint64
	for i := 0; i < 5; i++ {
		l, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err, "acquire %d", i)
		require.Greater(t, l.Token().Seq, highest, "tokens increase")
		highest = l.Token().Seq
		require.NoError(t, l.Release(ctx))
	}
	assert.Greater(t, highest, uint64(1e15), "lifted to the clock floor")
	ttl, err := rdb.PTTL(ctx, counter).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute, "the counter carries its ttl")

	// SENTINEL FAILOVER does not wait for the replica to catch up (it is not
	// the coordinated FAILOVER command), and releases are not acknowledged:
	// let the replica catch up so the lock is free on the new master.
	pc, rc := primary.Client(), replica.Client()
	t.Cleanup(func() { pc.Close(); rc.Close() })
	waitCaughtUp(t, pc, rc)

	newMaster, err := s.Failover(ctx)
	require.NoError(t, err)
	require.Equal(t, replica.Addr(), newMaster, "the replica was promoted")
	// The failover client switches on +switch-master, asynchronously; until
	// then the old primary, still a master for a moment, could answer.
	require.Eventually(t, func() bool {
		port, err := rdb.ConfigGet(ctx, "port").Result()
		return err == nil && port["port"] == strconv.Itoa(replica.Port())
	}, 5*time.Second, 20*time.Millisecond, "the failover client follows the new master")

	seq, err := rc.Get(ctx, counter).Uint64()
	require.NoError(t, err, "the acknowledged counter is on the new master")
	assert.Equal(t, highest, seq)

	// Until the old primary rejoins, the new master has no replica: an
	// acquire with acknowledgement fails with ErrNotReplicated (and releases
	// the lock). Sentinel demotes the old primary within a few seconds.
	var (
		l          *lease.Lease
		notRepl    int
		deadline   = time.Now().Add(12 * time.Second)
		start      = time.Now()
		lastNotAck error
	)
	for {
		l, err = c.TryAcquire(ctx, n, time.Minute)
		if !errors.Is(err, lease.ErrNotReplicated) {
			break
		}
		notRepl++
		lastNotAck = err
		if time.Now().After(deadline) {
			t.Fatalf("no replica acknowledged within 12s after the failover: %v\nold primary: %s",
				lastNotAck, role(t, pc))
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	t.Logf("acknowledged again %v after the failover (%d acquires not acknowledged before)",
		time.Since(start).Round(time.Millisecond), notRepl)
	assert.Greater(t, l.Token().Seq, highest, "greater than every token before the failover")
	assert.Equal(t, "slave", role(t, pc), "the old primary rejoined as a replica")
	ttl, err = rdb.PTTL(ctx, counter).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute, "the counter still carries its ttl")
	got, err := pc.Get(ctx, counter).Uint64()
	require.NoError(t, err)
	assert.Equal(t, l.Token().Seq, got, "acknowledged: the old primary has the new counter")
	require.NoError(t, l.Release(ctx))
}

// waitCaughtUp waits until replica has processed the whole replication
// stream that primary has produced so far.
func waitCaughtUp(t *testing.T, primary, replica *redis.Client) {
	t.Helper()
	want := replOffset(t, primary)
	require.Eventually(t, func() bool { return replOffset(t, replica) >= want },
		5*time.Second, 5*time.Millisecond, "replica catching up to offset %d", want)
}

func replOffset(t *testing.T, c *redis.Client) int64 {
	n, _ := strconv.ParseInt(infoReplication(t, c, "master_repl_offset"), 10, 64)
	return n
}

func role(t *testing.T, c *redis.Client) string { return infoReplication(t, c, "role") }

func infoReplication(t *testing.T, c *redis.Client, field string) string {
	info, err := c.Info(t.Context(), "replication").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
