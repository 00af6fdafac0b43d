package protocol_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// Each script, run on a real Redis through the package's Go functions, with
// the Redis state checked afterwards, and what the Lua writes read back with
// the Go parsers.

// within asserts that d is in (want-slack, want].
func within(t testing.TB, want, d time.Duration, slack time.Duration, what string) {
	t.Helper()
	assert.LessOrEqual(t, d, want, what)
	assert.Greater(t, d, want-slack, what)
}

func TestAcquireUnfair(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	try := protocol.Try{Holder: "a", TTL: 10 * time.Second, Counter: counter}

	before := clockUS(t)
	res, err := protocol.Acquire(ctx, rdb, k, try)
	require.NoError(t, err)
	require.Equal(t, protocol.Acquired, res.Outcome)
	assert.True(t, res.Got())
	assert.Greater(t, res.Seq, before, "a new counter starts at the clock")
	assert.Equal(t, protocol.LockValue("a", res.Seq), lockValue(t, k))
	h, seq, err := protocol.ParseLockValue(lockValue(t, k))
	require.NoError(t, err)
	assert.Equal(t, "a", h)
	assert.Equal(t, res.Seq, seq)
	assert.Equal(t, res.Seq, counterValue(t, k))
	within(t, 10*time.Second, pttl(t, k.Lock), time.Second, "lock ttl")
	within(t, time.Hour, pttl(t, k.Counter), time.Minute, "counter ttl")

	// The same holder again: the same Seq, the ttl reset to the new try's.
	require.NoError(t, rdb.PExpire(ctx, k.Lock, 3*time.Second).Err())
	again, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: 20 * time.Second, Counter: counter})
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reacquired, Seq: res.Seq}, again)
	assert.True(t, again.Got())
	within(t, 20*time.Second, pttl(t, k.Lock), time.Second, "lock ttl after re-acquire")
	assert.Equal(t, res.Seq, counterValue(t, k), "a re-acquire issues no Seq")

	// Another holder: Held, with the lock's remaining ttl.
	other, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "b", TTL: time.Second, Counter: counter})
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, other.Outcome)
	assert.False(t, other.Got())
	within(t, 20*time.Second, other.PTTL, time.Second, "Held PTTL")
	assert.Equal(t, protocol.LockValue("a", res.Seq), lockValue(t, k))

	// A holder whose id is a prefix of the holder's is another holder.
	kp := keysFor(t)
	take(t, kp, "ab", 5*time.Second)
	pre, err := protocol.Acquire(ctx, rdb, kp, protocol.Try{Holder: "a", TTL: time.Second, Counter: counter})
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, pre.Outcome)

	// Released, the next holder gets the next Seq.
	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	next, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "b", TTL: time.Second, Counter: counter})
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Acquired, Seq: res.Seq + 1}, next)
}

func TestAcquireUnfenced(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	try := protocol.Try{Holder: "a", TTL: 5 * time.Second, Counter: counter, Unfenced: true}
	res, err := protocol.Acquire(ctx, rdb, k, try)
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Acquired}, res)
	assert.Equal(t, "a:0", lockValue(t, k))
	assert.False(t, exists(t, k.Counter), "an unfenced lock has no counter")

	res, err = protocol.Acquire(ctx, rdb, k, try)
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reacquired}, res)

	// A fenced try by the same holder finds Seq 0: refused.
	try.Unfenced = false
	_, err = protocol.Acquire(ctx, rdb, k, try)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unfenced")
	assert.False(t, exists(t, k.Counter))

	// A fenced lock re-acquired unfenced keeps its Seq.
	k2 := keysFor(t)
	seq := take(t, k2, "a", 5*time.Second)
	res, err = protocol.Acquire(ctx, rdb, k2, protocol.Try{Holder: "a", TTL: 5 * time.Second, Unfenced: true})
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reacquired, Seq: seq}, res)
}

func TestAcquireUnfencedSetNX(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	res, err := protocol.AcquireUnfenced(ctx, rdb, k, "a", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Acquired}, res)
	// The same key and value as an unfenced Try.
	assert.Equal(t, protocol.LockValue("a", 0), lockValue(t, k))
	within(t, 5*time.Second, pttl(t, k.Lock), time.Second, "lock ttl")
	again, err := protocol.Acquire(ctx, rdb, k, protocol.Try{Holder: "a", TTL: 5 * time.Second, Unfenced: true})
	require.NoError(t, err)
	assert.Equal(t, protocol.Reacquired, again.Outcome)

	held, err := protocol.AcquireUnfenced(ctx, rdb, k, "b", time.Second)
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, held.Outcome)
	within(t, 5*time.Second, held.PTTL, time.Second, "Held PTTL")
}

// queued is the queue's members in order, and the tickets hash parsed.
func queued(t testing.TB, k protocol.Keys) ([]string, map[string]protocol.Ticket) {
	t.Helper()
	q, err := rdb.ZRange(t.Context(), k.Queue, 0, -1).Result()
	require.NoError(t, err)
	raw, err := rdb.HGetAll(t.Context(), k.Tickets).Result()
	require.NoError(t, err)
	tickets := map[string]protocol.Ticket{}
	for h, s := range raw {
		tk, err := protocol.ParseTicket(s)
		require.NoError(t, err, "ticket of %s: %q", h, s)
		tickets[h] = tk
	}
	return q, tickets
}

func fairTry(holder string, ttl time.Duration, a protocol.Attempt) protocol.Try {
	return protocol.Try{Holder: holder, TTL: ttl, Counter: counter, Fair: true, Attempt: a, PubSub: protocol.PubSubClassic}
}

func TestAcquireFairQueues(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "h", 10*time.Second)

	// Attempt 0 does not queue.
	res, err := protocol.Acquire(ctx, rdb, k, fairTry("w0", time.Second, 0))
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, res.Outcome)
	within(t, 10*time.Second, res.PTTL, time.Second, "Held PTTL")
	assert.False(t, exists(t, k.Queue))
	assert.False(t, exists(t, k.Tickets))

	// A try with an attempt queues and writes the ticket.
	before := clockUS(t) / 1000
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("w1", 7*time.Second, 11))
	require.NoError(t, err)
	after := clockUS(t) / 1000
	assert.Equal(t, protocol.Held, res.Outcome)
	q, tickets := queued(t, k)
	assert.Equal(t, []string{"w1"}, q)
	require.Contains(t, tickets, "w1")
	tk := tickets["w1"]
	assert.Equal(t, protocol.TicketTTL, tk.TTL, "the ttl the lock is handed over with: the claim window, below the waiter's 7s")
	assert.Equal(t, protocol.Attempt(11), tk.Attempt)
	exp := uint64(tk.Expires.UnixMilli())
	assert.GreaterOrEqual(t, exp, before+uint64(protocol.TicketTTL.Milliseconds()))
	assert.LessOrEqual(t, exp, after+uint64(protocol.TicketTTL.Milliseconds()))
	within(t, protocol.TicketTTL, pttl(t, k.Queue), 500*time.Millisecond, "queue ttl")
	within(t, protocol.TicketTTL, pttl(t, k.Tickets), 500*time.Millisecond, "tickets ttl")

	res, err = protocol.Acquire(ctx, rdb, k, fairTry("w2", 1500*time.Millisecond, 21))
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, res.Outcome)
	score1, err := rdb.ZScore(ctx, k.Queue, "w1").Result()
	require.NoError(t, err)

	// w1 renews with a new attempt: it keeps its place, its ticket names the new try.
	time.Sleep(5 * time.Millisecond)
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("w1", 8*time.Second, 12))
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, res.Outcome)
	q, tickets = queued(t, k)
	assert.Equal(t, []string{"w1", "w2"}, q)
	assert.Equal(t, protocol.Attempt(12), tickets["w1"].Attempt)
	assert.Equal(t, protocol.TicketTTL, tickets["w1"].TTL)
	assert.Equal(t, protocol.Attempt(21), tickets["w2"].Attempt)
	assert.Equal(t, 1500*time.Millisecond, tickets["w2"].TTL, "a ttl below the claim window is handed over whole")
	again, err := rdb.ZScore(ctx, k.Queue, "w1").Result()
	require.NoError(t, err)
	assert.Equal(t, score1, again, "ZADD NX keeps the first arrival")

	st, err := protocol.Inspect(ctx, rdb, k)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Queued)
	assert.Equal(t, "h", st.Holder)
	assert.Equal(t, seq, st.Seq)

	// The holder re-acquiring through the fair script: Reacquired, queue untouched.
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("h", 10*time.Second, 99))
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reacquired, Seq: seq}, res)
	q, _ = queued(t, k)
	assert.Equal(t, []string{"w1", "w2"}, q)
}

func TestAcquireFairReserved(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)

	// A free lock with nobody queued: the fair try takes it.
	before := clockUS(t)
	res, err := protocol.Acquire(ctx, rdb, k, fairTry("a", 5*time.Second, 1))
	require.NoError(t, err)
	require.Equal(t, protocol.Acquired, res.Outcome)
	assert.Greater(t, res.Seq, before)
	assert.False(t, exists(t, k.Queue), "a try that got the lock does not queue")
	ok, err := protocol.Refresh(ctx, rdb, k, "a", 0, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	// w1 queues behind a, then the lock goes free (deleted: no handoff).
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("w1", 5*time.Second, 1))
	require.NoError(t, err)
	require.Equal(t, protocol.Held, res.Outcome)
	require.NoError(t, rdb.Del(ctx, k.Lock).Err())

	// Free, but w1 is a live head ahead: Reserved; x queues behind w1, and
	// the lock is handed to w1 (its claim window), as a release would.
	sub := subscribe(t, k, false)
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("x", 5*time.Second, 2))
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reserved}, res)
	assert.False(t, res.Got())
	q, _ := queued(t, k)
	assert.Equal(t, []string{"x"}, q)
	m := sub.message()
	assert.Equal(t, protocol.Message{Handoff: true, Holder: "w1", Seq: m.Seq, Attempt: 1}, m)
	assert.Equal(t, protocol.LockValue("w1", m.Seq), lockValue(t, k))
	within(t, protocol.ClaimTTL(5*time.Second), pttl(t, k.Lock), time.Second, "claim window")
	// Without an attempt, a try finds it held, and does not queue.
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("y", 5*time.Second, 0))
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, res.Outcome)
	q, _ = queued(t, k)
	assert.Equal(t, []string{"x"}, q)

	// The head's try finds it handed over: its ttl, and it leaves the queue.
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("w1", 6*time.Second, 3))
	require.NoError(t, err)
	assert.Equal(t, protocol.Reacquired, res.Outcome)
	assert.Equal(t, m.Seq, res.Seq)
	assert.Equal(t, protocol.LockValue("w1", res.Seq), lockValue(t, k))
	within(t, 6*time.Second, pttl(t, k.Lock), time.Second, "lock ttl")
	q, tickets := queued(t, k)
	assert.Equal(t, []string{"x"}, q)
	assert.NotContains(t, tickets, "w1")

	// With the head's ticket dead and the lock free, a try that is not
	// the head's drops it and takes the lock (nobody live ahead).
	require.NoError(t, rdb.Del(ctx, k.Lock).Err())
	deadTicket(t, k, "x", 1)
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("z", 5*time.Second, 4))
	require.NoError(t, err)
	assert.Equal(t, protocol.Acquired, res.Outcome)
}

// deadTicket queues holder with a ticket that expired a second ago, as a
// waiter that died would leave it.
func deadTicket(t testing.TB, k protocol.Keys, holder string, score float64) {
	t.Helper()
	tk := protocol.Ticket{Expires: time.UnixMilli(int64(clockUS(t)/1000) - 1000), TTL: 5 * time.Second, Attempt: 5}
	require.NoError(t, rdb.ZAdd(t.Context(), k.Queue, redis.Z{Score: score, Member: holder}).Err())
	require.NoError(t, rdb.HSet(t.Context(), k.Tickets, holder, tk.String()).Err())
	require.NoError(t, rdb.Set(t.Context(), k.Waiting, "1", time.Minute).Err()) // as its try did
}

func TestLiveHeadDropsExpiredTickets(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	deadTicket(t, k, "dead1", 1)
	deadTicket(t, k, "dead2", 2)
	// A queue entry without a ticket counts as expired too.
	require.NoError(t, rdb.ZAdd(ctx, k.Queue, redis.Z{Score: 3, Member: "noticket"}).Err())
	// Without the waiting key (a queue no fair try wrote), nobody looks
	// at the queue.
	require.NoError(t, rdb.Del(ctx, k.Waiting).Err())
	res, err := protocol.Acquire(ctx, rdb, k, fairTry("x", 5*time.Second, 1))
	require.NoError(t, err)
	assert.Equal(t, protocol.Acquired, res.Outcome)
	q, _ := queued(t, k)
	assert.Len(t, q, 3, "the queue was not looked at")
	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "x", Fair: true, Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, rdb.Set(ctx, k.Waiting, "1", time.Minute).Err())
	res, err = protocol.Acquire(ctx, rdb, k, fairTry("x", 5*time.Second, 1))
	require.NoError(t, err)
	assert.Equal(t, protocol.Acquired, res.Outcome, "no live head: the lock is free for anyone")
	q, tickets := queued(t, k)
	assert.Empty(t, q)
	assert.Empty(t, tickets)

	// A dead head before a live one: the live one is the head.
	k2 := keysFor(t)
	take(t, k2, "h", 5*time.Second)
	deadTicket(t, k2, "dead", 1) // score 1: ahead of any real arrival
	res, err = protocol.Acquire(ctx, rdb, k2, fairTry("live", 4*time.Second, 77))
	require.NoError(t, err)
	require.Equal(t, protocol.Held, res.Outcome)
	sub := subscribe(t, k2, false)
	ok, err = protocol.Unlock(ctx, rdb, k2, protocol.Release{Holder: "h", Fair: true, Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	m := sub.message()
	assert.Equal(t, "live", m.Holder)
	assert.Equal(t, protocol.Attempt(77), m.Attempt)
	q, tickets = queued(t, k2)
	assert.Empty(t, q)
	assert.Empty(t, tickets)
}

func TestUnlockFairHandsOff(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "h", 10*time.Second)
	for i, w := range []struct {
		holder string
		ttl    time.Duration
		a      protocol.Attempt
	}{{"w1", 7 * time.Second, 100}, {"w2", 1500 * time.Millisecond, 200}, {"w1", 7 * time.Second, 101}} {
		res, err := protocol.Acquire(ctx, rdb, k, fairTry(w.holder, w.ttl, w.a))
		require.NoError(t, err, "try %d", i)
		require.Equal(t, protocol.Held, res.Outcome)
	}
	sub := subscribe(t, k, false)

	// Not the holder: nothing happens.
	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "w2", Fair: true, Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, protocol.LockValue("h", seq), lockValue(t, k))
	sub.none()

	ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "h", Fair: true, Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	m := sub.message()
	assert.Equal(t, protocol.Message{Handoff: true, Holder: "w1", Seq: seq + 1, Attempt: 101}, m,
		"the head, the new Seq, the attempt of the head's last try")
	assert.Equal(t, protocol.LockValue("w1", seq+1), lockValue(t, k))
	within(t, protocol.ClaimTTL(7*time.Second), pttl(t, k.Lock), 300*time.Millisecond,
		"the handed lock has the claim window, not the head's 7s: a head that died holds it no longer")
	assert.Equal(t, seq+1, counterValue(t, k))
	q, tickets := queued(t, k)
	assert.Equal(t, []string{"w2"}, q)
	assert.NotContains(t, tickets, "w1")

	// The head's try finds the lock handed to it.
	res, err := protocol.Acquire(ctx, rdb, k, fairTry("w1", 7*time.Second, 102))
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reacquired, Seq: seq + 1}, res)
	within(t, 7*time.Second, pttl(t, k.Lock), 300*time.Millisecond, "the try extended the handed lock to its ttl")

	// And on to w2, sharded this time, with SPUBLISH.
	shard := subscribe(t, k, true)
	ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "w1", Fair: true, Counter: counter, PubSub: protocol.PubSubSharded})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, protocol.Message{Handoff: true, Holder: "w2", Seq: seq + 2, Attempt: 200}, shard.message())
	sub.none() // SPUBLISH does not reach SUBSCRIBE
	within(t, 1500*time.Millisecond, pttl(t, k.Lock), 300*time.Millisecond, "w2's ttl, below the claim window")

	// Nobody waits: the lock is deleted and no message sent.
	ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "w2", Fair: true, Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "", lockValue(t, k))
	assert.Equal(t, seq+2, counterValue(t, k))
	sub.none()
	shard.none()
	assert.False(t, exists(t, k.Queue))
	assert.False(t, exists(t, k.Tickets))
}

func TestUnlockUnfair(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "a", 10*time.Second)
	sub := subscribe(t, k, false)

	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "b", Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	assert.False(t, ok)
	sub.none()

	ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, protocol.Message{}, sub.message(), "a plain wake-up")
	assert.Equal(t, "", lockValue(t, k))
	assert.Equal(t, seq, counterValue(t, k), "an unfair release issues no Seq")

	ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	assert.False(t, ok, "already released")
	sub.none()

	// Sharded and unknown (a cluster not asked yet) publish with SPUBLISH.
	for _, p := range []protocol.PubSub{protocol.PubSubSharded, protocol.PubSubUnknown} {
		take(t, k, "a", 10*time.Second)
		shard := subscribe(t, k, true)
		ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: p})
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, protocol.Message{}, shard.message())
		sub.none()
		require.NoError(t, shard.ps.Close())
	}
	// None (a ring) publishes with PUBLISH.
	take(t, k, "a", 10*time.Second)
	ok, err = protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubNone})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, protocol.Message{}, sub.message())
}

func TestLeave(t *testing.T) {
	ctx := t.Context()
	rel := func(holder string) protocol.Release {
		return protocol.Release{Holder: holder, Fair: true, Counter: counter, PubSub: protocol.PubSubClassic}
	}

	t.Run("drops the ticket", func(t *testing.T) {
		k := keysFor(t)
		seq := take(t, k, "h", 10*time.Second)
		for _, w := range []string{"w1", "w2"} {
			_, err := protocol.Acquire(ctx, rdb, k, fairTry(w, 5*time.Second, 1))
			require.NoError(t, err)
		}
		ok, err := protocol.Leave(ctx, rdb, k, rel("w1"), true)
		require.NoError(t, err)
		assert.False(t, ok, "w1 did not have the lock")
		q, tickets := queued(t, k)
		assert.Equal(t, []string{"w2"}, q)
		assert.NotContains(t, tickets, "w1")
		assert.Contains(t, tickets, "w2")
		assert.Equal(t, protocol.LockValue("h", seq), lockValue(t, k))
		// Leaving when not queued is a no-op.
		ok, err = protocol.Leave(ctx, rdb, k, rel("w1"), false)
		require.NoError(t, err)
		assert.False(t, ok)
	})

	t.Run("passes on a handed lock", func(t *testing.T) {
		k := keysFor(t)
		seq := take(t, k, "h", 10*time.Second)
		_, err := protocol.Acquire(ctx, rdb, k, fairTry("w1", 5*time.Second, 1))
		require.NoError(t, err)
		_, err = protocol.Acquire(ctx, rdb, k, fairTry("w2", 4*time.Second, 2))
		require.NoError(t, err)
		sub := subscribe(t, k, false)
		ok, err := protocol.Unlock(ctx, rdb, k, rel("h"))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, protocol.Message{Handoff: true, Holder: "w1", Seq: seq + 1, Attempt: 1}, sub.message())

		// w1 gave up before it saw the message: the lock goes on to w2.
		ok, err = protocol.Leave(ctx, rdb, k, rel("w1"), true)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, protocol.Message{Handoff: true, Holder: "w2", Seq: seq + 2, Attempt: 2}, sub.message())
		assert.Equal(t, protocol.LockValue("w2", seq+2), lockValue(t, k))
		within(t, protocol.ClaimTTL(4*time.Second), pttl(t, k.Lock), 300*time.Millisecond, "w2's claim window")
		q, tickets := queued(t, k)
		assert.Empty(t, q)
		assert.Empty(t, tickets)

		// w2 leaves with nobody behind: the lock is free, no message.
		ok, err = protocol.Leave(ctx, rdb, k, rel("w2"), true)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "", lockValue(t, k))
		sub.none()
	})

	t.Run("without passOn keeps the lock", func(t *testing.T) {
		k := keysFor(t)
		seq := take(t, k, "h", 10*time.Second)
		_, err := protocol.Acquire(ctx, rdb, k, fairTry("w1", 5*time.Second, 1))
		require.NoError(t, err)
		_, err = protocol.Acquire(ctx, rdb, k, fairTry("w2", 5*time.Second, 2))
		require.NoError(t, err)
		ok, err := protocol.Unlock(ctx, rdb, k, rel("h"))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, protocol.LockValue("w1", seq+1), lockValue(t, k))

		ok, err = protocol.Leave(ctx, rdb, k, rel("w1"), false)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, protocol.LockValue("w1", seq+1), lockValue(t, k))
		q, _ := queued(t, k)
		assert.Equal(t, []string{"w2"}, q)
	})

	t.Run("unfair", func(t *testing.T) {
		k := keysFor(t)
		take(t, k, "a", 10*time.Second)
		sub := subscribe(t, k, false)
		r := protocol.Release{Holder: "a", Counter: counter, PubSub: protocol.PubSubClassic}
		ok, err := protocol.Leave(ctx, rdb, k, r, false)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.NotEqual(t, "", lockValue(t, k), "without passOn an unfair Leave does nothing")
		ok, err = protocol.Leave(ctx, rdb, k, r, true)
		require.NoError(t, err)
		assert.True(t, ok, "with passOn it is Unlock")
		assert.Equal(t, "", lockValue(t, k))
		assert.Equal(t, protocol.Message{}, sub.message())
	})
}

func TestRefresh(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	ok, err := protocol.Refresh(ctx, rdb, k, "a", 0, time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "free lock")
	seq := take(t, k, "a", time.Second)
	ok, err = protocol.Refresh(ctx, rdb, k, "a", 0, 30*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	within(t, 30*time.Second, pttl(t, k.Lock), time.Second, "refreshed ttl")
	assert.Equal(t, protocol.LockValue("a", seq), lockValue(t, k))
	assert.Equal(t, seq, counterValue(t, k), "a refresh issues no Seq")
	ok, err = protocol.Refresh(ctx, rdb, k, "b", 0, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	within(t, 30*time.Second, pttl(t, k.Lock), time.Second, "ttl untouched by another holder")

	// With a Seq, only that token of the holder is refreshed: after a late
	// handoff message, the lock may be the same holder's with a newer one.
	ok, err = protocol.Refresh(ctx, rdb, k, "a", seq+1, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "another token of the same holder")
	within(t, 30*time.Second, pttl(t, k.Lock), time.Second, "ttl untouched for another token")
	ok, err = protocol.Refresh(ctx, rdb, k, "a", seq, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "the holder's own token")
	within(t, time.Minute, pttl(t, k.Lock), time.Second, "refreshed with the token")
}

func TestReissue(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "a", 10*time.Second)
	require.NoError(t, rdb.PExpire(ctx, k.Lock, 8*time.Second).Err())

	n, err := protocol.Reissue(ctx, rdb, k, "a", 0, counter)
	require.NoError(t, err)
	assert.Equal(t, seq+1, n)
	assert.Equal(t, protocol.LockValue("a", seq+1), lockValue(t, k))
	within(t, 8*time.Second, pttl(t, k.Lock), time.Second, "the lock's ttl is kept")
	assert.Equal(t, seq+1, counterValue(t, k))

	floor := seq + 1000
	n, err = protocol.Reissue(ctx, rdb, k, "a", floor, counter)
	require.NoError(t, err)
	assert.Equal(t, floor+1, n, "above the floor")
	assert.Equal(t, protocol.LockValue("a", floor+1), lockValue(t, k))
	assert.Equal(t, floor+1, counterValue(t, k))

	// Not the holder: 0, but the counter is lifted to the floor.
	n, err = protocol.Reissue(ctx, rdb, k, "b", floor+500, counter)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, floor+500, counterValue(t, k))
	assert.Equal(t, protocol.LockValue("a", floor+1), lockValue(t, k), "the holder's lock is untouched")
	// A floor below the counter does not lower it.
	n, err = protocol.Reissue(ctx, rdb, k, "b", 5, counter)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, floor+500, counterValue(t, k))

	// The next holder's token is above the floor.
	ok, err := protocol.Unlock(ctx, rdb, k, protocol.Release{Holder: "a", PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, floor+501, take(t, k, "b", time.Second))
}

func TestAdopt(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "a", 10*time.Second)
	require.NoError(t, rdb.PExpire(ctx, k.Lock, 8*time.Second).Err())

	// Above the counter: the counter and the token both become seq.
	n, err := protocol.Adopt(ctx, rdb, k, "a", seq+50, counter)
	require.NoError(t, err)
	assert.Equal(t, seq+50, n)
	assert.Equal(t, seq+50, counterValue(t, k))
	assert.Equal(t, protocol.LockValue("a", seq+50), lockValue(t, k))
	within(t, 8*time.Second, pttl(t, k.Lock), time.Second, "the lock's ttl is kept")

	// Below the counter: the counter stays, the token is seq all the same.
	n, err = protocol.Adopt(ctx, rdb, k, "a", seq+10, counter)
	require.NoError(t, err)
	assert.Equal(t, seq+50, n)
	assert.Equal(t, seq+50, counterValue(t, k))
	assert.Equal(t, protocol.LockValue("a", seq+10), lockValue(t, k))

	// Not the holder: only the counter.
	n, err = protocol.Adopt(ctx, rdb, k, "b", seq+70, counter)
	require.NoError(t, err)
	assert.Equal(t, seq+70, n)
	assert.Equal(t, seq+70, counterValue(t, k))
	assert.Equal(t, protocol.LockValue("a", seq+10), lockValue(t, k))

	// A free lock: only the counter; nothing is created.
	k2 := keysFor(t)
	before := clockUS(t)
	n, err = protocol.Adopt(ctx, rdb, k2, "a", 5, counter)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, before, "a missing counter stands at the clock")
	assert.Equal(t, n, counterValue(t, k2))
	assert.Equal(t, "", lockValue(t, k2))
}

func TestAdvance(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	seq := take(t, k, "a", 10*time.Second)
	n, err := protocol.Advance(ctx, rdb, k, seq+100, counter)
	require.NoError(t, err)
	assert.Equal(t, seq+100, n)
	assert.Equal(t, seq+100, counterValue(t, k))
	assert.Equal(t, protocol.LockValue("a", seq), lockValue(t, k), "the lock is untouched")
	// Never lowers it.
	n, err = protocol.Advance(ctx, rdb, k, 1, counter)
	require.NoError(t, err)
	assert.Equal(t, seq+100, n)
	assert.Equal(t, seq+100, counterValue(t, k))
	within(t, time.Hour, pttl(t, k.Counter), time.Minute, "counter ttl")
}

func TestInspect(t *testing.T) {
	ctx := t.Context()
	k := keysFor(t)
	st, err := protocol.Inspect(ctx, rdb, k)
	require.NoError(t, err)
	assert.Equal(t, protocol.State{}, st, "nothing there")

	seq := take(t, k, "a", 10*time.Second)
	for _, w := range []string{"w1", "w2", "w3"} {
		_, err := protocol.Acquire(ctx, rdb, k, fairTry(w, time.Second, 1))
		require.NoError(t, err)
	}
	_, err = protocol.Advance(ctx, rdb, k, seq+7, counter)
	require.NoError(t, err)
	st, err = protocol.Inspect(ctx, rdb, k)
	require.NoError(t, err)
	assert.Equal(t, "a", st.Holder)
	assert.Equal(t, seq, st.Seq)
	within(t, 10*time.Second, st.PTTL, time.Second, "PTTL")
	assert.Equal(t, seq+7, st.LastSeq)
	assert.Equal(t, 3, st.Queued)
	assert.Equal(t, "w1", st.Head, "the queue's head")
	assert.Equal(t, protocol.Attempt(1), st.HeadTicket.Attempt, "the head's ticket")
	assert.Equal(t, time.Second, st.HeadTicket.TTL, "the head's claim window")

	// Free, with the counter left.
	require.NoError(t, rdb.Del(ctx, k.Lock, k.Queue, k.Tickets).Err())
	st, err = protocol.Inspect(ctx, rdb, k)
	require.NoError(t, err)
	assert.Equal(t, protocol.State{LastSeq: seq + 7}, st)

	// A lock without a ttl (set by hand) has PTTL NoTTL; an unfenced one Seq 0.
	require.NoError(t, rdb.Set(ctx, k.Lock, protocol.LockValue("u", 0), 0).Err())
	st, err = protocol.Inspect(ctx, rdb, k)
	require.NoError(t, err)
	assert.Equal(t, protocol.State{Holder: "u", PTTL: protocol.NoTTL, LastSeq: seq + 7}, st)

	// A value that is no lock value is an error.
	require.NoError(t, rdb.Set(ctx, k.Lock, "garbage", 0).Err())
	_, err = protocol.Inspect(ctx, rdb, k)
	assert.Error(t, err)
	require.NoError(t, rdb.Set(ctx, k.Lock, protocol.LockValue("u", 0), 0).Err())
	require.NoError(t, rdb.Set(ctx, k.Counter, "x", 0).Err())
	_, err = protocol.Inspect(ctx, rdb, k)
	assert.Error(t, err)
}

func TestAcquireAcked(t *testing.T) {
	ctx := t.Context()
	c, ok := rdb.(protocol.Pipeliner)
	require.True(t, ok, "%T is no Pipeliner", rdb)
	k := keysFor(t)

	// With the scripts flushed: NOSCRIPT, loaded and run again. (Not on a
	// server of REDIS_URL, whose script cache may serve others.)
	if testenv.RedisURL() == "" {
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
	}
	res, acked, err := protocol.AcquireAcked(ctx, c, k, protocol.Try{Holder: "a", TTL: 5 * time.Second, Counter: counter}, 0, 100*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, protocol.Acquired, res.Outcome)
	assert.Zero(t, acked, "no replicas")
	assert.Equal(t, protocol.LockValue("a", res.Seq), lockValue(t, k))

	// A standalone server has no replica to acknowledge: WAIT 1 times out with 0.
	start := time.Now()
	again, acked, err := protocol.AcquireAcked(ctx, c, k, protocol.Try{Holder: "a", TTL: 5 * time.Second, Counter: counter}, 1, 50*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, protocol.TryResult{Outcome: protocol.Reacquired, Seq: res.Seq}, again)
	assert.Zero(t, acked)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "WAIT waited")

	held, _, err := protocol.AcquireAcked(ctx, c, k, protocol.Try{Holder: "b", TTL: time.Second, Counter: counter}, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, protocol.Held, held.Outcome)

	// Fair, too.
	k2 := keysFor(t)
	res, _, err = protocol.AcquireAcked(ctx, c, k2, fairTry("f", 5*time.Second, 1), 0, 0)
	require.NoError(t, err)
	assert.Equal(t, protocol.Acquired, res.Outcome)

	// The fenced try on an unfenced value is refused here as well.
	k3 := keysFor(t)
	_, err = protocol.AcquireUnfenced(ctx, rdb, k3, "a", 5*time.Second)
	require.NoError(t, err)
	_, _, err = protocol.AcquireAcked(ctx, c, k3, protocol.Try{Holder: "a", TTL: time.Second, Counter: counter}, 0, 0)
	assert.Error(t, err)
}
