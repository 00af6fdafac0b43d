package protocol_test

// Adversarial schedules against the semaphore's scripts (issue 32): each
// test sets up the exact state a schedule reaches and fails if one of the
// semaphore's promises breaks (lease/semaphore.go's doc, docs/design.md
// "The semaphore").

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// TestSemaphoreAdversaryGarbagePermitsWakes: commit b1bd18f made a release
// survive a permits key another client made garbage: the slot is freed and
// the waiters are woken, since no handoff names them. A value that Lua's
// tonumber reads as a number but that no try writes (N is 1..64) goes down
// the shrink branch instead: the slot is deleted and nobody is woken, so the
// waiters learn of the free slot only from their poll. "nan" is the plain
// case: tonumber gives NaN, which is truthy and compares false.
func TestSemaphoreAdversaryGarbagePermitsWakes(t *testing.T) {
	for _, p := range []string{"nan", "0", "-1", "-inf"} {
		t.Run(p, func(t *testing.T) {
			s := semFor(t, 1)
			sub := subscribe(t, s.Keys, false)
			require.Equal(t, protocol.Acquired, permitTry(t, s, "a", 0).Outcome)
			require.Equal(t, protocol.Held, permitTry(t, s, "b", protocol.NewAttempt()).Outcome)
			require.NoError(t, rdb.Set(t.Context(), s.Permits, p, 0).Err())
			require.True(t, release(t, s, 0, "a"))
			require.Equal(t, "", lockValue(t, s.Slot(0)), "the slot is free")
			_, woken := sub.next(500 * time.Millisecond)
			assert.True(t, woken, "permits %q: slot 0 was freed with b queued, and no message (handoff or wake-up) was published", p)
		})
	}
}

// TestSemaphoreAdversaryKeysBounded: design.md "Keys are bounded": after a
// release only the counter is left, and it expires with the counter ttl;
// the queue 2s after its last waiter. A semaphore that was used and then
// left alone must leave nothing behind once both have passed. The permits
// key is written with a plain SET (sem_acquire.lua), without a ttl: every
// semaphore name ever used stays in Redis for good.
func TestSemaphoreAdversaryKeysBounded(t *testing.T) {
	ctx := t.Context()
	s := semFor(t, 2)
	short := protocol.Counter{TTL: 200 * time.Millisecond}
	try := func(holder string, a protocol.Attempt) protocol.PermitResult {
		r, err := protocol.AcquirePermit(ctx, rdb, s, protocol.Try{Holder: holder, TTL: time.Second, Counter: short, Attempt: a, PubSub: protocol.PubSubClassic})
		require.NoError(t, err)
		return r
	}
	rel := func(slot int, holder string) {
		ok, err := protocol.Unlock(ctx, rdb, s.Slot(slot), protocol.Release{Holder: holder, Counter: short, PubSub: protocol.PubSubClassic})
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Equal(t, 0, try("a", 0).Slot)
	require.Equal(t, 1, try("b", 0).Slot)
	require.Equal(t, protocol.Held, try("c", protocol.NewAttempt()).Outcome) // a queue too
	rel(0, "a")                                                              // handed to c
	rel(0, "c")
	rel(1, "b")
	tag := s.Permits[:strings.Index(s.Permits, "}")+1]
	// The counters' ttl (200ms) and the queue's (2s, TicketTTL) have passed.
	time.Sleep(protocol.TicketTTL + 500*time.Millisecond)
	left, err := rdb.Keys(ctx, escapeGlob(tag)+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, left, "keys of an unused semaphore still in Redis after the counter ttl and the ticket ttl")
}

// escapeGlob escapes KEYS's glob characters in s.
func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// TestSemaphoreAdversaryClusterMigration: the semaphore's scripts name 7
// keys whatever N is and make the other slots' key names themselves
// (slot.lua). Redis Cluster checks the declared keys against a hash slot
// being migrated before it runs a script: while all 7 are still on the
// source node, the script runs there, and a slot's lock already moved to
// the target could look free, so that the script handed that slot to a
// second holder while its first holder's key lives on the target.
//
// The schedule: N=2, a holds slot 0 (its counter lifted above the clock, so
// its ahead key exists, as after Advance or Reissue), b holds slot 1, c
// waits (queue, tickets, waiting exist), permits exists. The name's hash
// slot is being resharded; MIGRATE has moved slot 1's lock key only. c's
// try, the head's, must not get slot 1. (It holds on Redis 7.0: the
// script's own MGET of the moved key is refused, "non local key", so the
// try fails instead.)
func TestSemaphoreAdversaryClusterMigration(t *testing.T) {
	cl := testenv.NewCluster(t, 2)
	cc := cl.Client()
	t.Cleanup(func() { cc.Close() })
	ctx := t.Context()
	s := protocol.SemaphoreFor("fencelock-protocol-test:", "migrating", 2)
	try := func(holder string, a protocol.Attempt) protocol.PermitResult {
		r, err := protocol.AcquirePermit(ctx, cc, s, protocol.Try{Holder: holder, TTL: time.Minute, Counter: counter, Attempt: a, PubSub: protocol.PubSubSharded})
		require.NoError(t, err)
		return r
	}
	require.Equal(t, 0, try("a", 0).Slot)
	require.Equal(t, 1, try("b", 0).Slot)
	now, err := cc.Time(ctx).Result()
	require.NoError(t, err)
	_, err = protocol.Advance(ctx, cc, s.Slot(0), uint64(now.Add(time.Hour).UnixMicro()), counter)
	require.NoError(t, err)
	ac := protocol.NewAttempt()
	require.Equal(t, protocol.Held, try("c", ac).Outcome)
	for _, k := range []string{s.Keys.Lock, s.Keys.Counter, s.Keys.Ahead, s.Keys.Queue, s.Keys.Tickets, s.Keys.Waiting, s.Permits} {
		require.Equal(t, int64(1), cc.Exists(ctx, k).Val(), "declared key %s exists", k)
	}

	// Reshard the name's hash slot: source MIGRATING, target IMPORTING,
	// and slot 1's lock moved first.
	hs, err := cc.ClusterKeySlot(ctx, s.Permits).Result()
	require.NoError(t, err)
	var src, dst *redis.Client
	for _, n := range cl.Nodes() {
		c := n.Client()
		t.Cleanup(func() { c.Close() })
		if c.Exists(ctx, s.Permits).Val() == 1 {
			src = c
		} else {
			dst = c
		}
	}
	require.NotNil(t, src)
	require.NotNil(t, dst)
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	require.NoError(t, dst.Do(ctx, "CLUSTER", "SETSLOT", hs, "IMPORTING", srcID).Err())
	require.NoError(t, src.Do(ctx, "CLUSTER", "SETSLOT", hs, "MIGRATING", dstID).Err())
	dstHost, dstPort, _ := strings.Cut(dst.Options().Addr, ":")
	require.NoError(t, src.Do(ctx, "MIGRATE", dstHost, dstPort, s.Slot(1).Lock, 0, 5000).Err())

	// c's try, as the head of the queue.
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := protocol.AcquirePermit(tctx, cc, s, protocol.Try{Holder: "c", TTL: time.Minute, Counter: counter, Attempt: ac, PubSub: protocol.PubSubSharded})
	if err != nil {
		t.Logf("c's try during the migration was refused: %v", err)
		return
	}
	t.Logf("c's try during the migration: %+v", r)
	onSrc := src.Get(ctx, s.Slot(1).Lock).Val()
	pipe := dst.Pipeline()
	pipe.Do(ctx, "ASKING")
	g := pipe.Get(ctx, s.Slot(1).Lock)
	_, _ = pipe.Exec(ctx)
	assert.False(t, r.Got() && r.Slot == 1,
		"c was given slot 1 (on the source: %q) while b holds it (on the target: %q): two holders of one slot, at N=2 three permits held",
		onSrc, g.Val())
}
