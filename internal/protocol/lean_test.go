package protocol_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// TestUncontendedCommands pins the server work of an uncontended acquire
// and release, the commands each script runs (INFO commandstats, on a
// Redis of its own), so that a change that adds one shows: one MGET reads
// the lock, its counter and the keys that say whether the counter may be
// above the clock (then TIME) and whether anyone may queue (then ZCARD),
// and a release with nobody queued deletes the lock without more: 7
// commands for a fair acquire and release (10 before).
func TestUncontendedCommands(t *testing.T) {
	own := testenv.NewRedis(t).Client()
	t.Cleanup(func() { own.Close() })
	ctx := t.Context()
	for _, tc := range []struct {
		fair             bool
		acquire, release map[string]int
	}{
		{fair: true,
			acquire: map[string]int{"evalsha": 1, "mget": 1, "set": 2},
			release: map[string]int{"evalsha": 1, "mget": 1, "del": 1}},
		{fair: false,
			acquire: map[string]int{"evalsha": 1, "mget": 1, "set": 2},
			release: map[string]int{"evalsha": 1, "get": 1, "del": 1, "publish": 1}},
	} {
		k := keysFor(t)
		try := protocol.Try{Holder: "h1", TTL: time.Minute, Counter: counter, Fair: tc.fair}
		rel := protocol.Release{Holder: "h1", Fair: tc.fair, Counter: counter, PubSub: protocol.PubSubClassic}
		// The first calls load the scripts (a NOSCRIPT and an EVAL each)
		// and create the counter: the ones counted are the next.
		_, err := protocol.Acquire(ctx, own, k, try)
		require.NoError(t, err)
		_, err = protocol.Unlock(ctx, own, k, rel)
		require.NoError(t, err)
		require.NoError(t, own.ConfigResetStat(ctx).Err())
		res, err := protocol.Acquire(ctx, own, k, try)
		require.NoError(t, err)
		require.Equal(t, protocol.Acquired, res.Outcome)
		require.Equal(t, tc.acquire, commandCalls(t, own), "fair %v: acquire", tc.fair)
		require.NoError(t, own.ConfigResetStat(ctx).Err())
		ok, err := protocol.Unlock(ctx, own, k, rel)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tc.release, commandCalls(t, own), "fair %v: release", tc.fair)
	}
}

var cmdstat = regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`)

// commandCalls are the calls per command since CONFIG RESETSTAT, without
// the CONFIG and INFO of the test itself.
func commandCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	s, err := c.Info(t.Context(), "commandstats").Result()
	require.NoError(t, err)
	calls := map[string]int{}
	for _, m := range cmdstat.FindAllStringSubmatch(s, -1) {
		if m[1] == "config|resetstat" || m[1] == "info" {
			continue
		}
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		calls[m[1]] = n
	}
	return calls
}

// TestUncontendedPermitCommands pins a semaphore's uncontended acquire
// and release: one MGET reads the waiting and permits keys, slot 0's
// counter and ahead key and every slot, then the lock and counter are
// set; the release is the fair lock's. 7 commands, whatever N, as a
// lock's (8 when slot 0 is held: one MGET more for the free slot's
// counter).
func TestUncontendedPermitCommands(t *testing.T) {
	own := testenv.NewRedis(t).Client()
	t.Cleanup(func() { own.Close() })
	ctx := t.Context()
	for _, n := range []int{1, protocol.MaxPermits} {
		s := semFor(t, n)
		try := protocol.Try{Holder: "h1", TTL: time.Minute, Counter: counter, PubSub: protocol.PubSubClassic}
		rel := protocol.Release{Holder: "h1", Counter: counter, PubSub: protocol.PubSubClassic}
		for i := range 2 { // the first loads the scripts, writes N and creates the counter
			require.NoError(t, own.ConfigResetStat(ctx).Err())
			res, err := protocol.AcquirePermit(ctx, own, s, try)
			require.NoError(t, err)
			require.Equal(t, protocol.Acquired, res.Outcome)
			require.Equal(t, 0, res.Slot)
			if i == 1 {
				require.Equal(t, map[string]int{"evalsha": 1, "mget": 1, "set": 2}, commandCalls(t, own), "%d permits: acquire", n)
			}
			require.NoError(t, own.ConfigResetStat(ctx).Err())
			ok, err := protocol.Unlock(ctx, own, s.Slot(res.Slot), rel)
			require.NoError(t, err)
			require.True(t, ok)
			if i == 1 {
				require.Equal(t, map[string]int{"evalsha": 1, "mget": 1, "del": 1}, commandCalls(t, own), "%d permits: release", n)
			}
		}
	}
}
