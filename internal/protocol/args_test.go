package protocol_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// maxCallAllocs bounds the allocations of a lock's keys, a fair try and a
// fair release, go-redis's own included (about 29 of them for the two
// script calls of 6 keys). It was 45 when each call built its KEYS and
// boxed its arguments anew.
const maxCallAllocs = 35

// raceBuild: the test binary was built with -race (race_test.go).
var raceBuild bool

// TestCallAllocs: the keys of a fresh lock, an uncontended fair try and
// its release stay within maxCallAllocs allocations.
func TestCallAllocs(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector allocates on its own")
	}
	ctx := t.Context()
	const runs = 200
	names := make([]string, runs+1) // AllocsPerRun runs it once more to warm up
	for i := range names {
		names[i] = fmt.Sprintf("%s/%d", keysFor(t).Lock, i)
	}
	i := 0
	n := testing.AllocsPerRun(runs, func() {
		k := protocol.KeysFor("fencelock-protocol-test:", names[i])
		i++
		res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "h1", TTL: time.Minute, Counter: counter, Fair: true})
		if err != nil || res.Outcome != protocol.Acquired {
			t.Fatal(res, err)
		}
		ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "h1", Fair: true, Counter: counter, PubSub: protocol.PubSubClassic})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
	})
	t.Logf("%.0f allocations per keys, try and release", n)
	assert.LessOrEqual(t, n, float64(maxCallAllocs))
}

// TestKeysByHand: Keys built or changed by hand, which KeysFor's KEYS
// lists do not match, are the keys the calls use.
func TestKeysByHand(t *testing.T) {
	ctx := t.Context()
	made := keysFor(t)
	other := keysFor(t)
	byHand := protocol.Keys{Lock: other.Lock, Counter: other.Counter, Queue: other.Queue, Tickets: other.Tickets,
		Channel: other.Channel, Ahead: other.Ahead, Waiting: other.Waiting}
	changed := made
	changed.Lock, changed.Counter = other.Lock, other.Counter
	for _, k := range []protocol.Keys{byHand, changed} {
		for _, fair := range []bool{false, true} {
			res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "h1", TTL: time.Minute, Counter: counter, Fair: fair})
			require.NoError(t, err)
			require.Equal(t, protocol.Acquired, res.Outcome)
			assert.Equal(t, protocol.LockValue("h1", res.Seq), lockValue(t, other))
			assert.Equal(t, res.Seq, counterValue(t, other))
			assert.False(t, exists(t, made.Lock), "the lock of the keys KeysFor made")
			ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "h1", Fair: fair, Counter: counter})
			require.NoError(t, err)
			require.True(t, ok)
			assert.False(t, exists(t, other.Lock))
		}
	}
}

// TestArgsShared: calls on one Keys at the same time, with different
// holder ids and ttls, each send their own (the boxed arguments and the
// argument list a Keys keeps are shared; run with -race too), and the
// list is given back after each.
func TestArgsShared(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "h1", time.Minute)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			holder, ttl := "h1", time.Minute+time.Duration(g)*time.Second
			if g%2 == 1 {
				holder = "h2" // not the holder: refused
			}
			for range 50 {
				ok, err := protocol.Refresh(ctx, rdb, k, holder, seq, ttl)
				if !assert.NoError(t, err) || !assert.Equal(t, holder == "h1", ok, holder) {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.False(t, protocol.ListLent(k))
	ok, err := protocol.Refresh(ctx, rdb, k, "h1", seq, 2*time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, pttl(t, k.Lock), time.Minute+30*time.Second, "the ttl of the last refresh")

	// Every kind of call gives the list back.
	for _, fair := range []bool{false, true} {
		k := keysFor(t)
		try := protocol.Try{Holder: "h1", TTL: time.Minute, Counter: counter, Fair: fair}
		rel := protocol.Release{Holder: "h1", Fair: fair, Counter: counter}
		_, err := protocol.Acquire(ctx, rdb, k, try)
		require.NoError(t, err)
		assert.False(t, protocol.ListLent(k), "fair %v: acquire", fair)
		_, err = protocol.Refresh(ctx, rdb, k, "h1", 0, time.Minute)
		require.NoError(t, err)
		assert.False(t, protocol.ListLent(k), "fair %v: refresh", fair)
		_, err = protocol.Leave(ctx, rdb, k, rel, true)
		require.NoError(t, err)
		assert.False(t, protocol.ListLent(k), "fair %v: leave", fair)
		_, err = protocol.Unlock(ctx, rdb, k, rel)
		require.NoError(t, err)
		assert.False(t, protocol.ListLent(k), "fair %v: unlock", fair)
	}
}
