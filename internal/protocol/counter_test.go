package protocol_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// The counter rule (counter.go): a missing counter stands at the server's
// clock in µs, whatever Counter.TTL; a counter is never given a ttl shorter
// than the time until the clock passes its value. Each test here failed
// under the previous rule (a TTL-0 counter started at 0, Advance, Reissue
// and Adopt lifted a missing counter to the floor alone and kept the old
// ttl, and every write gave the counter Counter.TTL whatever its value).

// counterTTLs are the settings every rule must hold for.
var counterTTLs = []time.Duration{0, 50 * time.Millisecond, time.Hour}

// assertOutlivesValue asserts that k's counter, at value v, lives at least
// until the server's clock passes v: its expiry (TIME and PTTL read in one
// transaction) is not before v µs. A counter without a ttl passes.
func assertOutlivesValue(t testing.TB, k protocol.Keys, v uint64) {
	t.Helper()
	var now *redis.TimeCmd
	var left *redis.DurationCmd
	var val *redis.StringCmd
	_, err := rdb.TxPipelined(t.Context(), func(p redis.Pipeliner) error {
		now = p.Time(t.Context())
		left = p.PTTL(t.Context(), k.Counter)
		val = p.Get(t.Context(), k.Counter)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(v), val.Val(), "counter value")
	d := left.Val()
	if d == -1 {
		return // no ttl
	}
	require.Positive(t, d, "counter %s missing", k.Counter)
	// PTTL is rounded down to the ms: the key lives (d, d+1ms] more.
	expiry := uint64(now.Val().UnixMicro()) + uint64((d+time.Millisecond)/time.Microsecond)
	assert.GreaterOrEqual(t, expiry, v,
		"counter %d expires %v from now, before the clock passes it (%v from now)", v, d,
		time.Duration(v-uint64(now.Val().UnixMicro()))*time.Microsecond)
}

// (a) A missing counter starts at the clock whatever Counter.TTL, with or
// without ClockFloor, for every script that issues a Seq.
func TestCounterMissingStartsAtClock(t *testing.T) {
	ctx := t.Context()
	for _, ttl := range counterTTLs {
		for _, floor := range []bool{false, true} {
			c := protocol.Counter{TTL: ttl, ClockFloor: floor}
			t.Run(fmt.Sprintf("ttl=%v,floor=%v", ttl, floor), func(t *testing.T) {
				check := func(what string, seq, before uint64) {
					t.Helper()
					after := clockUS(t)
					assert.Greater(t, seq, before, "%s: Seq %d is below the clock %d", what, seq, before)
					assert.LessOrEqual(t, seq, after+1, what)
				}

				k := keysFor(t)
				before := clockUS(t)
				res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: c})
				require.NoError(t, err)
				require.Equal(t, protocol.Acquired, res.Outcome)
				check("unfair acquire", res.Seq, before)
				assert.Equal(t, res.Seq, counterValue(t, k))
				if ttl == 0 {
					assert.Equal(t, time.Duration(-1), pttl(t, k.Counter), "TTL 0 keeps the counter forever")
				} else {
					assert.LessOrEqual(t, pttl(t, k.Counter), ttl, "a counter at the clock gets Counter.TTL")
				}

				k = keysFor(t)
				before = clockUS(t)
				res, err = protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: c, Fair: true, Attempt: 1})
				require.NoError(t, err)
				require.Equal(t, protocol.Acquired, res.Outcome)
				check("fair acquire", res.Seq, before)

				// A fair handoff after the counter went missing.
				_, err = protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "w", TTL: time.Second, Counter: c, Fair: true, Attempt: 9})
				require.NoError(t, err)
				require.NoError(t, rdb.Del(ctx, k.Counter).Err())
				sub := subscribe(t, k, false)
				before = clockUS(t)
				ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", Fair: true, Counter: c, PubSub: protocol.PubSubClassic})
				require.NoError(t, err)
				require.True(t, ok)
				m := sub.message()
				assert.Equal(t, "w", m.Holder)
				check("handoff", m.Seq, before)

				// A reissue for a holder whose counter went missing.
				k = keysFor(t)
				require.NoError(t, rdb.Set(ctx, k.Lock, protocol.LockValue("a", 5), time.Second).Err())
				before = clockUS(t)
				n, err := protocol.Reissue(ctx, rdb, k, "a", 3, c)
				require.NoError(t, err)
				check("reissue", n, before)
				assert.Equal(t, protocol.LockValue("a", n), lockValue(t, k))
			})
		}
	}
}

// (b) Advance on a missing counter returns at least the clock, never just
// the floor; the next Seq follows it. (Under the old rule: 5, then Seq 6.)
func TestCounterAdvanceMissing(t *testing.T) {
	ctx := t.Context()
	for _, ttl := range counterTTLs {
		t.Run(fmt.Sprint(ttl), func(t *testing.T) {
			c := protocol.Counter{TTL: ttl}
			k := keysFor(t)
			seq := take(t, k, "a", time.Second)
			require.NoError(t, rdb.Del(ctx, k.Counter).Err())
			before := clockUS(t)
			n, err := protocol.Advance(ctx, rdb, k, 5, c)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, n, before, "a missing counter stands at the clock")
			assert.Greater(t, n, seq)
			assert.Equal(t, n, counterValue(t, k), "Advance writes the counter it reports")

			ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
			require.NoError(t, err)
			require.True(t, ok)
			res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "b", TTL: time.Second, Counter: c})
			require.NoError(t, err)
			assert.Equal(t, n+1, res.Seq)

			// A missing counter and a floor above the clock: the floor.
			require.NoError(t, rdb.Del(ctx, k.Counter).Err())
			high := clockUS(t) + 5_000_000
			n, err = protocol.Advance(ctx, rdb, k, high, c)
			require.NoError(t, err)
			assert.Equal(t, high, n)
		})
	}
}

// (c) A counter lifted above the clock lives until the clock has passed
// it, whatever Counter.TTL; and a Seq issued from it keeps that ttl.
func TestCounterAboveClockOutlivesTTL(t *testing.T) {
	ctx := t.Context()
	for _, ttl := range counterTTLs {
		t.Run(fmt.Sprint(ttl), func(t *testing.T) {
			c := protocol.Counter{TTL: ttl}
			k := keysFor(t)
			take(t, k, "a", time.Second)
			// Two hours ahead: longer than the 1h TTL too.
			high := clockUS(t) + uint64(2*time.Hour/time.Microsecond)
			n, err := protocol.Advance(ctx, rdb, k, high, c)
			require.NoError(t, err)
			require.Equal(t, high, n)
			assertOutlivesValue(t, k, high)
			if ttl != 0 {
				assert.Greater(t, pttl(t, k.Counter), 2*time.Hour-time.Minute)
			}

			// A Seq taken from it: the same guarantee.
			ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
			require.NoError(t, err)
			require.True(t, ok)
			res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "b", TTL: time.Second, Counter: c})
			require.NoError(t, err)
			require.Equal(t, high+1, res.Seq)
			assertOutlivesValue(t, k, high+1)

			// And a fair handoff from it.
			_, err = protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "w", TTL: time.Second, Counter: c, Fair: true, Attempt: 3})
			require.NoError(t, err)
			ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "b", Fair: true, Counter: c, PubSub: protocol.PubSubClassic})
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, protocol.LockValue("w", high+2), lockValue(t, k))
			assertOutlivesValue(t, k, high+2)
		})
	}
}

// (c) With a short Counter.TTL, a counter above the clock does not expire
// after that TTL.
func TestCounterAboveClockShortTTLDoesNotExpire(t *testing.T) {
	ctx := t.Context()
	c := protocol.Counter{TTL: 50 * time.Millisecond}
	k := keysFor(t)
	seq := take(t, k, "a", 5*time.Second)
	high := clockUS(t) + 1_000_000_000 // 1000 s ahead
	_, err := protocol.Advance(ctx, rdb, k, high, c)
	require.NoError(t, err)
	kr := keysFor(t) // Reissue's counter
	require.NoError(t, rdb.Set(ctx, kr.Lock, protocol.LockValue("a", 1), 5*time.Second).Err())
	n, err := protocol.Reissue(ctx, rdb, kr, "a", high, c)
	require.NoError(t, err)
	require.Equal(t, high+1, n)

	time.Sleep(150 * time.Millisecond)
	assert.Equal(t, high, counterValue(t, k), "the counter is still there")
	assert.Equal(t, high+1, counterValue(t, kr), "the counter is still there")
	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "b", TTL: time.Second, Counter: c})
	require.NoError(t, err)
	assert.Equal(t, high+1, res.Seq)
	assert.Greater(t, res.Seq, seq)

	// A counter at the clock, though, does expire after the short TTL (the
	// clock is past it then, so a new one starts above it).
	k2 := keysFor(t)
	s2 := take(t, k2, "a", 5*time.Second)
	_, err = protocol.Reissue(ctx, rdb, k2, "nobody", 0, c) // rewrites it with TTL 50ms
	require.NoError(t, err)
	require.LessOrEqual(t, pttl(t, k2.Counter), 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.False(t, exists(t, k2.Counter))
	ok, err = protocol.Unlock(ctx, rdb, k2, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, take(t, k2, "b", time.Second), s2)
}

// (d) Clients with different Counter.TTL on one lock: tokens never go back,
// even when the counter goes missing in between (old rule: 1 2 3 1 2).
func TestCounterMixedTTLsNeverGoBack(t *testing.T) {
	ctx := t.Context()
	clients := []protocol.Counter{{TTL: 0}, {TTL: time.Hour}, {TTL: 0, ClockFloor: true}, {TTL: 50 * time.Millisecond}}
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			k := keysFor(t)
			var seqs []uint64
			for round := 0; round < 12; round++ {
				if round%3 == 2 { // before each of the clients in turn
					require.NoError(t, rdb.Del(ctx, k.Counter).Err(), "the counter expires, is evicted or lost")
				}
				c := clients[round%len(clients)]
				holder := fmt.Sprintf("h%d", round)
				res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: holder, TTL: time.Second, Counter: c, Fair: fair, Attempt: 1})
				require.NoError(t, err)
				require.Equal(t, protocol.Acquired, res.Outcome, "round %d", round)
				seqs = append(seqs, res.Seq)
				if fair {
					// The next client queues and is handed the lock.
					next := clients[(round+1)%len(clients)]
					w := fmt.Sprintf("w%d", round)
					_, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: w, TTL: time.Second, Counter: next, Fair: true, Attempt: 2})
					require.NoError(t, err)
					ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: holder, Fair: true, Counter: c, PubSub: protocol.PubSubClassic})
					require.NoError(t, err)
					require.True(t, ok)
					_, s, err := protocol.ParseLockValue(lockValue(t, k))
					require.NoError(t, err)
					seqs = append(seqs, s)
					if round%4 == 2 {
						require.NoError(t, rdb.Del(ctx, k.Counter).Err())
					}
					ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: w, Fair: true, Counter: next, PubSub: protocol.PubSubClassic})
					require.NoError(t, err)
					require.True(t, ok)
				} else {
					ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: holder, Counter: c, PubSub: protocol.PubSubClassic})
					require.NoError(t, err)
					require.True(t, ok)
				}
			}
			for i := 1; i < len(seqs); i++ {
				require.Greater(t, seqs[i], seqs[i-1], "tokens went back: %v", seqs)
			}
		})
	}
}

// ClockFloor lifts a counter that went back while it exists (a replica that
// missed the last increments) to the clock; without it, the counter counts on.
func TestCounterClockFloor(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	require.NoError(t, rdb.Set(ctx, k.Counter, "5", 0).Err())
	res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: protocol.Counter{TTL: time.Hour}})
	require.NoError(t, err)
	assert.Equal(t, uint64(6), res.Seq, "a present counter counts on")
	_, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	before := clockUS(t)
	res, err = protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: protocol.Counter{TTL: time.Hour, ClockFloor: true}})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, res.Seq, before)
}

// (e) Reissue and Adopt above the clock keep the same ttl guarantee, for
// the holder and for another holder (counter only), whatever Counter.TTL.
func TestCounterReissueAdoptAboveClock(t *testing.T) {
	ctx := t.Context()
	for _, ttl := range counterTTLs {
		t.Run(fmt.Sprint(ttl), func(t *testing.T) {
			c := protocol.Counter{TTL: ttl}
			ahead := uint64(2 * time.Hour / time.Microsecond)

			k := keysFor(t)
			take(t, k, "a", 5*time.Second)
			high := clockUS(t) + ahead
			n, err := protocol.Reissue(ctx, rdb, k, "a", high, c)
			require.NoError(t, err)
			require.Equal(t, high+1, n)
			assertOutlivesValue(t, k, high+1)

			high += 1000
			n, err = protocol.Reissue(ctx, rdb, k, "b", high, c)
			require.NoError(t, err)
			require.Zero(t, n)
			assertOutlivesValue(t, k, high)

			// On a missing counter too.
			require.NoError(t, rdb.Del(ctx, k.Counter).Err())
			n, err = protocol.Reissue(ctx, rdb, k, "b", high, c)
			require.NoError(t, err)
			require.Zero(t, n)
			assertOutlivesValue(t, k, high)

			k = keysFor(t)
			take(t, k, "a", 5*time.Second)
			high = clockUS(t) + ahead
			n, err = protocol.Adopt(ctx, rdb, k, "a", high, c)
			require.NoError(t, err)
			require.Equal(t, high, n)
			assert.Equal(t, protocol.LockValue("a", high), lockValue(t, k))
			assertOutlivesValue(t, k, high)

			high += 1000
			n, err = protocol.Adopt(ctx, rdb, k, "b", high, c)
			require.NoError(t, err)
			require.Equal(t, high, n)
			assertOutlivesValue(t, k, high)

			require.NoError(t, rdb.Del(ctx, k.Counter).Err())
			n, err = protocol.Adopt(ctx, rdb, k, "b", high, c)
			require.NoError(t, err)
			require.Equal(t, high, n)
			assertOutlivesValue(t, k, high)
		})
	}
}

// isErrorReply asserts err is an error reply from Redis naming 2^53-1.
func isErrorReply(t testing.TB, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	var rerr redis.Error
	assert.ErrorAs(t, err, &rerr, "%s: %v is no error reply", what, err)
	assert.Contains(t, err.Error(), "2^53-1", what)
	assert.False(t, protocol.MayHaveRun(err), what)
}

// (f) No Seq past 2^53-1 (Lua numbers are doubles): an error reply instead.
func TestCounterPastMaxSeq(t *testing.T) {
	ctx := t.Context()
	setMax := func(k protocol.Keys) {
		require.NoError(t, rdb.Set(ctx, k.Counter, fmt.Sprint(uint64(maxSeq)), 0).Err())
	}

	// The last Seq there is.
	k := keysFor(t)
	require.NoError(t, rdb.Set(ctx, k.Counter, fmt.Sprint(uint64(maxSeq-1)), 0).Err())
	res, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: counter})
	require.NoError(t, err)
	assert.Equal(t, uint64(maxSeq), res.Seq)
	assert.Equal(t, protocol.LockValue("a", maxSeq), lockValue(t, k))
	assert.Equal(t, uint64(maxSeq), counterValue(t, k))

	for _, floor := range []bool{false, true} {
		c := protocol.Counter{TTL: time.Hour, ClockFloor: floor}
		k := keysFor(t)
		setMax(k)
		_, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: c})
		isErrorReply(t, err, "unfair acquire")
		assert.Equal(t, "", lockValue(t, k), "the lock is not taken")
		assert.Equal(t, uint64(maxSeq), counterValue(t, k))

		_, err = protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: time.Second, Counter: c, Fair: true, Attempt: 1})
		isErrorReply(t, err, "fair acquire")
		assert.Equal(t, "", lockValue(t, k))

		// Advance does not reach it: a floor that far above the clock is
		// refused (TestPoisonedFloorRefused).
		k = keysFor(t)
		_, err = protocol.Advance(ctx, rdb, k, maxSeq, c)
		require.ErrorIs(t, err, protocol.ErrPoisoned)

		// Reissue for the holder.
		k = keysFor(t)
		require.NoError(t, rdb.Set(ctx, k.Lock, protocol.LockValue("a", 1), 5*time.Second).Err())
		setMax(k)
		_, err = protocol.Reissue(ctx, rdb, k, "a", 0, c)
		isErrorReply(t, err, "reissue")
		assert.Equal(t, protocol.LockValue("a", 1), lockValue(t, k), "the token is unchanged")

		// A fair handoff.
		k = keysFor(t)
		take(t, k, "a", 5*time.Second)
		_, err = protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "w", TTL: time.Second, Counter: c, Fair: true, Attempt: 1})
		require.NoError(t, err)
		setMax(k)
		_, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", Fair: true, Counter: c, PubSub: protocol.PubSubClassic})
		isErrorReply(t, err, "fair release")
		v := lockValue(t, k)
		assert.NotContains(t, v, "w:", "no handoff past 2^53-1")
	}
}

// The server's clock is what a missing counter starts at: check that the
// test's premise holds on this server (TIME in µs, about 1.8e15 today, below
// 2^53 so Seqs are exact).
func TestCounterClockPremise(t *testing.T) {
	now := clockUS(t)
	assert.Greater(t, now, uint64(1_500_000_000_000_000))
	assert.Less(t, now, uint64(maxSeq))
}
