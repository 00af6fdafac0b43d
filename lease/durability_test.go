package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// fastClient is a client for r that fails fast when r is down or paused.
func fastClient(t *testing.T, r *testenv.Redis) *redis.Client {
	t.Helper()
	opt := r.Options()
	opt.DialTimeout, opt.ReadTimeout, opt.MaxRetries = 200*time.Millisecond, time.Second, -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// waitReplicated waits until replica has key with the value it has on primary.
func waitReplicated(t *testing.T, primary, replica *redis.Client, key string) {
	t.Helper()
	want, err := primary.Get(t.Context(), key).Result()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, _ := replica.Get(t.Context(), key).Result()
		return got == want
	}, 5*time.Second, 5*time.Millisecond)
}

// TestFailoverToLaggingReplica: the replica is paused, token N is issued on
// the primary and used, the primary dies, the replica is promoted and hands
// out Seq N again to another holder. The verifier's conflict rule rejects
// it; with replica acknowledgement on, the first acquire fails instead of
// handing out an unreplicated token.
func TestFailoverToLaggingReplica(t *testing.T) {
	ctx := t.Context()
	const lock = "orders"
	counter := "fencelock:{" + lock + "}:fence"

	t.Run("without ack: duplicate Seq rejected by the verifier", func(t *testing.T) {
		primary, replica := testenv.NewReplicated(t)
		pc, rc := fastClient(t, primary), fastClient(t, replica)
		v := verifier.NewMemory()
		a, err := lease.New(pc, lease.WithCounterTTL(0)) // a counter that can go backwards
		require.NoError(t, err)
		counting(t, pc, lock)
		for i := 0; i < 3; i++ {
			l, err := a.TryAcquire(ctx, lock, time.Minute)
			require.NoError(t, err)
			require.NoError(t, v.Claim(ctx, lock, l.Token()))
			require.NoError(t, l.Release(ctx))
		}
		waitReplicated(t, pc, rc, counter)

		// The replica stops, and the primary drops its link (as a primary does
		// with a replica that stopped reading): what follows never reaches it.
		require.NoError(t, replica.Pause())
		require.NoError(t, pc.ClientKillByFilter(ctx, "TYPE", "replica").Err())
		first, err := a.TryAcquire(ctx, lock, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, uint64(4), first.Token().Seq)
		require.NoError(t, v.Claim(ctx, lock, first.Token()), "the first holder writes with token 4")
		require.NoError(t, primary.Kill())
		require.NoError(t, replica.Resume())
		require.NoError(t, replica.Promote(ctx))

		b, err := lease.New(rc, lease.WithCounterTTL(0))
		require.NoError(t, err)
		second, err := b.TryAcquire(ctx, lock, time.Minute)
		require.NoError(t, err, "the promoted replica never saw the lock")
		assert.Equal(t, uint64(4), second.Token().Seq, "and hands out Seq 4 again")
		assert.True(t, second.Token().Conflicts(first.Token()))

		err = v.Claim(ctx, lock, second.Token())
		require.ErrorIs(t, err, verifier.ErrStale, "the conflict rule rejects the second holder")
		var stale *verifier.StaleError
		require.ErrorAs(t, err, &stale)
		assert.True(t, stale.Conflict())
		seq, holder := v.Highest(lock)
		assert.Equal(t, first.Token(), fence.Token{Key: lock, Seq: seq, Holder: holder}, "nothing changed")
	})

	t.Run("with ack: the unreplicated acquire fails and is released", func(t *testing.T) {
		primary, replica := testenv.NewReplicated(t)
		pc := fastClient(t, primary)
		patient, err := lease.New(pc, lease.WithReplicaAck(1, 5*time.Second))
		require.NoError(t, err)
		l, err := patient.TryAcquire(ctx, lock, time.Minute)
		require.NoError(t, err, "acknowledged while the replica keeps up")
		require.NoError(t, l.Release(ctx))

		a, err := lease.New(pc, lease.WithReplicaAck(1, 200*time.Millisecond))
		require.NoError(t, err)
		l, err = a.TryAcquire(ctx, lock, time.Minute)
		require.NoError(t, err, "acknowledged while the replica keeps up")
		require.NoError(t, l.Release(ctx))

		require.NoError(t, replica.Pause())
		start := time.Now()
		_, err = a.TryAcquire(ctx, lock, time.Minute)
		require.ErrorIs(t, err, lease.ErrNotReplicated)
		assert.Contains(t, err.Error(), "0 of 1 replicas")
		assert.Less(t, time.Since(start), 5*time.Second)
		info, err := a.Inspect(ctx, lock)
		require.NoError(t, err)
		assert.Empty(t, info.Holder, "the unacknowledged lock was released")
		require.NoError(t, replica.Resume())
	})
}

func TestClockFloor(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, lease.WithClockFloor(true), lease.WithCounterTTL(time.Hour))
	n := name(t)
	counter := "fencelock:{" + n + "}:fence"

	before := uint64(time.Now().UnixMicro())
	l, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	first := l.Token().Seq
	assert.GreaterOrEqual(t, first, before-uint64(time.Second.Microseconds()), "lifted to Redis TIME in µs")
	assert.Less(t, first, fence.MaxSeq)
	require.NoError(t, l.Release(ctx))

	ttl, err := shared.PTTL(ctx, counter).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute, "the counter carries its ttl")

	require.NoError(t, shared.Del(ctx, counter).Err(), "the counter is lost")
	l, err = c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, l.Token().Seq, first, "the next token is still larger")
	require.NoError(t, l.Release(ctx))

	// Without the floor, a lost counter starts again from the clock too
	// (the counter rule), whatever the client's counter ttl.
	plain := countingClient(t)
	last := l.Token().Seq
	require.NoError(t, shared.Del(ctx, counter).Err())
	l, err = plain.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, l.Token().Seq, last, "a lost counter does not start again from 1")
	require.NoError(t, l.Release(ctx))
	ttl, err = shared.PTTL(ctx, counter).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "no ttl on counters with WithCounterTTL(0)")
}

// TestDurabilityOptionsOnCluster: clock floor, counter ttl and replica
// acknowledgement on a Redis Cluster. The test cluster has no replicas, so
// asking for one must fail: that shows WAIT reached the lock's master.
func TestDurabilityOptionsOnCluster(t *testing.T) {
	cl := testenv.NewCluster(t, 3)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()

	c, err := lease.New(rdb, lease.WithClockFloor(true), lease.WithCounterTTL(time.Hour), lease.WithReplicaAck(0, 0))
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		n := fmt.Sprintf("floor-%d", i)
		l, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		assert.Greater(t, l.Token().Seq, uint64(1e15))
		ttl, err := rdb.PTTL(ctx, "fencelock:{"+n+"}:fence").Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Minute)
		require.NoError(t, l.Release(ctx))
	}

	acked, err := lease.New(rdb, lease.WithReplicaAck(1, 50*time.Millisecond))
	require.NoError(t, err)
	for i := 0; i < 6; i++ {
		n := fmt.Sprintf("ack-%d", i)
		_, err = acked.TryAcquire(ctx, n, time.Minute)
		require.ErrorIs(t, err, lease.ErrNotReplicated, n)
		info, err := acked.Inspect(ctx, n)
		require.NoError(t, err)
		assert.Empty(t, info.Holder)
	}
	zero, err := lease.New(rdb, lease.WithReplicaAck(0, time.Second))
	require.NoError(t, err)
	l, err := zero.TryAcquire(ctx, "ack-zero", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

func TestReissue(t *testing.T) {
	ctx := t.Context()
	c := countingClient(t)
	n := counting(t, shared, name(t))
	l, err := c.TryAcquire(ctx, n, time.Minute)
	require.NoError(t, err)
	tok, err := l.Reissue(ctx, 500)
	require.NoError(t, err)
	assert.Equal(t, uint64(501), tok.Seq)
	assert.Equal(t, tok, l.Token())
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Equal(t, tok, info.Token, "Redis has the new token")
	assert.Greater(t, info.TTL, 50*time.Second, "the ttl was kept")

	require.NoError(t, shared.Del(ctx, "fencelock:{"+n+"}").Err())
	_, err = l.Reissue(ctx, 1000)
	require.ErrorIs(t, err, lease.ErrLost, "no new token for a lease that is gone")
	_, err = context.Background(), nil
}

// TestMixedCounterTTL: a WithCounterTTL(0) client and a default client on
// one lock (a rolling upgrade mixes them). The default client gives the
// counter a ttl; when it expires, the next token of either client is still
// above every token issued (it used to restart at 1: tokens 1 2 3 1 2).
func TestMixedCounterTTL(t *testing.T) {
	ctx := t.Context()
	forever := countingClient(t)
	hourly := newClient(t, lease.WithCounterTTL(time.Hour))
	n := counting(t, shared, name(t))
	counter := protocol.KeysFor("fencelock:", n).Counter
	var last uint64
	take := func(c *lease.Client) {
		t.Helper()
		l, err := c.TryAcquire(ctx, n, time.Minute)
		require.NoError(t, err)
		assert.Greater(t, l.Token().Seq, last, "tokens never go back")
		last = l.Token().Seq
		require.NoError(t, l.Release(ctx))
	}
	for _, c := range []*lease.Client{forever, forever, forever, hourly} {
		take(c)
	}
	ttl, err := shared.PTTL(ctx, counter).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "the default client gave the counter a ttl")
	require.NoError(t, shared.Del(ctx, counter).Err(), "the counter expired")
	take(forever)
	take(forever)
	require.NoError(t, shared.Del(ctx, counter).Err())
	take(hourly)
}
