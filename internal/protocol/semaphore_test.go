package protocol_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
)

// semFor returns a semaphore of n unique to this test run.
func semFor(t testing.TB, n int) protocol.Semaphore {
	t.Helper()
	return protocol.SemaphoreFor("fencelock-protocol-test:", t.Name()+"/"+uuid.NewString()[:8], n)
}

func permitTry(t testing.TB, s protocol.Semaphore, holder string, a protocol.Attempt) protocol.PermitResult {
	t.Helper()
	r, err := protocol.AcquirePermit(t.Context(), rdb, s, protocol.Try{Holder: holder, TTL: 10 * time.Second, Counter: counter, Attempt: a, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	return r
}

func release(t testing.TB, s protocol.Semaphore, slot int, holder string) bool {
	t.Helper()
	ok, err := protocol.Unlock(t.Context(), rdb, s.Slot(slot), protocol.Release{Holder: holder, Counter: counter, PubSub: protocol.PubSubClassic})
	require.NoError(t, err)
	return ok
}

// TestSemaphoreSlots: N holders get the N slots, each with its own
// counter; the next waits, queued; a release hands the freed slot to it
// with a message naming the slot, and its token grows on that slot.
func TestSemaphoreSlots(t *testing.T) {
	s := semFor(t, 3)
	sub := subscribe(t, s.Keys, false)
	seqs := map[int]uint64{}
	for i, h := range []string{"a", "b", "c"} {
		r := permitTry(t, s, h, 0)
		require.Equal(t, protocol.Acquired, r.Outcome)
		require.Equal(t, i, r.Slot)
		seqs[r.Slot] = r.Seq
	}
	require.Equal(t, "3", mustGet(t, s.Permits))
	a := protocol.NewAttempt()
	r := permitTry(t, s, "d", a)
	require.Equal(t, protocol.Held, r.Outcome)
	require.Equal(t, -1, r.Slot)
	require.Greater(t, r.PTTL, time.Duration(0))
	r = permitTry(t, s, "e", protocol.NewAttempt())
	require.Equal(t, protocol.Held, r.Outcome)

	// b releases slot 1: it goes to d, the longest waiter, with slot 1's next Seq.
	require.True(t, release(t, s, 1, "b"))
	m := sub.message()
	require.True(t, m.Handoff && m.Permit)
	require.Equal(t, "d", m.Holder)
	require.Equal(t, 1, m.Slot)
	require.Equal(t, a, m.Attempt)
	require.Greater(t, m.Seq, seqs[1])
	require.Equal(t, "d:"+itoa(m.Seq), lockValue(t, s.Slot(1)))
	// d's next try finds it has slot 1.
	r = permitTry(t, s, "d", a)
	require.Equal(t, protocol.Reacquired, r.Outcome)
	require.Equal(t, 1, r.Slot)
	require.Equal(t, m.Seq, r.Seq)

	// a release by a non-holder does nothing
	require.False(t, release(t, s, 0, "b"))

	st, err := protocol.InspectSemaphore(t.Context(), rdb, s)
	require.NoError(t, err)
	require.Equal(t, 3, st.Permits)
	require.Equal(t, []string{"a", "d", "c"}, []string{st.Slots[0].Holder, st.Slots[1].Holder, st.Slots[2].Holder})
	require.Equal(t, 1, st.Queued)
	require.Equal(t, "e", st.Queue[0].Holder)
}

// TestSemaphoreShrink: a slot at or past the N of the last try is not
// handed on when released.
func TestSemaphoreShrink(t *testing.T) {
	s3 := semFor(t, 3)
	for _, h := range []string{"a", "b", "c"} {
		require.Equal(t, protocol.Acquired, permitTry(t, s3, h, 0).Outcome)
	}
	name := s3.Permits[len("fencelock-protocol-test:{") : len(s3.Permits)-len("}#permits")]
	s2 := protocol.SemaphoreFor("fencelock-protocol-test:", name, 2)
	a := protocol.NewAttempt()
	require.Equal(t, protocol.Held, permitTry(t, s2, "d", a).Outcome)
	require.Equal(t, "2", mustGet(t, s3.Permits))
	// c releases slot 2, past the new N: nobody gets it.
	require.True(t, release(t, s3, 2, "c"))
	require.Equal(t, "", lockValue(t, s3.Slot(2)))
	require.Equal(t, protocol.Held, permitTry(t, s2, "d", a).Outcome)
	// a releases slot 0: d gets it.
	require.True(t, release(t, s3, 0, "a"))
	r := permitTry(t, s2, "d", a)
	require.Equal(t, protocol.Reacquired, r.Outcome)
	require.Equal(t, 0, r.Slot)
}

// TestSemaphoreLeave: a waiter that gives up after a slot was handed to it
// passes the slot on to the next.
func TestSemaphoreLeave(t *testing.T) {
	s := semFor(t, 1)
	require.Equal(t, protocol.Acquired, permitTry(t, s, "a", 0).Outcome)
	ab, ac := protocol.NewAttempt(), protocol.NewAttempt()
	require.Equal(t, protocol.Held, permitTry(t, s, "b", ab).Outcome)
	require.Equal(t, protocol.Held, permitTry(t, s, "c", ac).Outcome)
	require.True(t, release(t, s, 0, "a"))
	require.Equal(t, "b", holderOf(t, s.Slot(0)))
	ok, err := protocol.LeavePermit(t.Context(), rdb, s, protocol.Release{Holder: "b", Counter: counter}, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "c", holderOf(t, s.Slot(0)))
}

// TestSemaphoreFreeSlotsDrain: when several slots are free with waiters
// queued (holders that expired), a try that is not the head's hands the
// first free slot to the head; the head's try takes one and hands the
// others to the next waiters.
func TestSemaphoreFreeSlotsDrain(t *testing.T) {
	s := semFor(t, 3)
	for _, h := range []string{"a", "b", "c"} {
		require.Equal(t, protocol.Acquired, permitTry(t, s, h, 0).Outcome)
	}
	as := map[string]protocol.Attempt{}
	for _, h := range []string{"d", "e", "f", "g"} {
		as[h] = protocol.NewAttempt()
		require.Equal(t, protocol.Held, permitTry(t, s, h, as[h]).Outcome)
	}
	for i := range 3 {
		require.NoError(t, rdb.Del(t.Context(), s.Slot(i).Lock).Err()) // expired
	}
	// e is not the head: reserved, and the first free slot goes to the
	// head, d, as a release would hand it.
	r := permitTry(t, s, "e", as["e"])
	require.Equal(t, protocol.Reserved, r.Outcome)
	require.Equal(t, "d", holderOf(t, s.Slot(0)))
	r = permitTry(t, s, "d", as["d"])
	require.Equal(t, protocol.Reacquired, r.Outcome)
	require.Equal(t, 0, r.Slot)
	// e, the head now, takes slot 1 and hands slot 2 to f.
	r = permitTry(t, s, "e", as["e"])
	require.Equal(t, protocol.Acquired, r.Outcome)
	require.Equal(t, 1, r.Slot)
	require.Equal(t, "f", holderOf(t, s.Slot(2)))
	r = permitTry(t, s, "g", as["g"])
	require.Equal(t, protocol.Held, r.Outcome)
}

func TestPermitName(t *testing.T) {
	require.Equal(t, "jobs#3", protocol.PermitName("jobs", 3))
	n, i, ok := protocol.ParsePermitName("a#b#12")
	require.True(t, ok)
	require.Equal(t, "a#b", n)
	require.Equal(t, 12, i)
	for _, bad := range []string{"jobs", "#1", "jobs#", "jobs#01", "jobs#64", "jobs#-1"} {
		_, _, ok := protocol.ParsePermitName(bad)
		require.False(t, ok, bad)
	}
}

func mustGet(t testing.TB, key string) string {
	t.Helper()
	v, err := rdb.Get(t.Context(), key).Result()
	require.NoError(t, err)
	return v
}

func holderOf(t testing.TB, k protocol.Keys) string {
	t.Helper()
	v := lockValue(t, k)
	h, _, err := protocol.ParseLockValue(v)
	require.NoError(t, err, v)
	return h
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestPermitNameIsTheSlot: the keys of lock NAME#i are slot i's, so that a
// permit's name reaches its slot from every tool that takes a lock name.
func TestPermitNameIsTheSlot(t *testing.T) {
	s := protocol.SemaphoreFor("p:", "jobs", 3)
	k := protocol.KeysFor("p:", "jobs#2")
	require.Equal(t, s.Slot(2).Lock, k.Lock)
	require.Equal(t, "p:{jobs}#2", k.Lock)
	require.Equal(t, "p:{jobs}#2:fence", k.Counter)
	require.Equal(t, "p:{jobs}#queue", k.Queue)
	require.Equal(t, "p:{jobs}#release", k.Channel)
	// Not a permit's name: a lock's own keys.
	for _, n := range []string{"jobs#64", "jobs#02", "jobs#", "#1"} {
		require.Equal(t, "p:{"+n+"}", protocol.KeysFor("p:", n).Lock, n)
	}
	// Inspect of the slot's name as a lock shows its holder and the queue.
	sem := semFor(t, 2)
	require.Equal(t, protocol.Acquired, permitTry(t, sem, "a", 0).Outcome)
	require.Equal(t, protocol.Acquired, permitTry(t, sem, "b", 0).Outcome)
	require.Equal(t, protocol.Held, permitTry(t, sem, "c", protocol.NewAttempt()).Outcome)
	st, err := protocol.Inspect(t.Context(), rdb, sem.Slot(1))
	require.NoError(t, err)
	require.Equal(t, "b", st.Holder)
	require.Equal(t, 1, st.Queued)
	require.Equal(t, "c", st.Head)
}

// TestSemaphoreForeignPermits: a permits key that another client made
// garbage does not break a release: the slot is freed and the waiters
// woken, and the next try writes N again.
func TestSemaphoreForeignPermits(t *testing.T) {
	s := semFor(t, 1)
	sub := subscribe(t, s.Keys, false)
	require.Equal(t, protocol.Acquired, permitTry(t, s, "a", 0).Outcome)
	a := protocol.NewAttempt()
	require.Equal(t, protocol.Held, permitTry(t, s, "b", a).Outcome)
	require.NoError(t, rdb.Set(t.Context(), s.Permits, "garbage", 0).Err())
	require.True(t, release(t, s, 0, "a"))
	p, ok := sub.next(2 * time.Second)
	require.True(t, ok)
	require.Equal(t, "", p, "a plain wake-up")
	r := permitTry(t, s, "b", a)
	require.Equal(t, protocol.Acquired, r.Outcome)
	require.Equal(t, "1", mustGet(t, s.Permits))
}

// TestSemaphoreMixedN: a holder handed a slot past its own N (by a client
// with a larger N) finds it with its next try, and passes it on when it
// leaves, instead of taking a second slot or stranding the first.
func TestSemaphoreMixedN(t *testing.T) {
	s2 := semFor(t, 2)
	name := s2.Permits[len("fencelock-protocol-test:{") : len(s2.Permits)-len("}#permits")]
	s1 := protocol.SemaphoreFor("fencelock-protocol-test:", name, 1)
	require.Equal(t, protocol.Acquired, permitTry(t, s2, "a", 0).Outcome) // slot 0
	require.Equal(t, protocol.Acquired, permitTry(t, s2, "b", 0).Outcome) // slot 1
	c := protocol.NewAttempt()
	require.Equal(t, protocol.Held, permitTry(t, s1, "c", c).Outcome) // N=1 queues; permits key 1
	require.Equal(t, protocol.Held, permitTry(t, s2, "d", 0).Outcome) // permits key 2 again
	require.True(t, release(t, s2, 1, "b"))                           // slot 1 handed to c
	require.Equal(t, "c", holderOf(t, s2.Slot(1)))
	require.True(t, release(t, s2, 0, "a")) // slot 0 free, nobody queued
	// c's try (sent before it read the handoff) finds slot 1, not a second slot.
	r := permitTry(t, s1, "c", c)
	require.Equal(t, protocol.Reacquired, r.Outcome)
	require.Equal(t, 1, r.Slot)
	require.Equal(t, "", lockValue(t, s2.Slot(0)), "slot 0 stays free")

	// A waiter of N=1 handed slot 1 that gives up passes it on.
	e, f := protocol.NewAttempt(), protocol.NewAttempt()
	require.Equal(t, protocol.Acquired, permitTry(t, s2, "x", 0).Outcome) // slot 0
	require.Equal(t, protocol.Held, permitTry(t, s1, "e", e).Outcome)
	require.Equal(t, protocol.Held, permitTry(t, s2, "f", f).Outcome)
	require.True(t, release(t, s2, 1, "c")) // handed to e, the head
	require.Equal(t, "e", holderOf(t, s2.Slot(1)))
	ok, err := protocol.LeavePermit(t.Context(), rdb, s1, protocol.Release{Holder: "e", Counter: counter, PubSub: protocol.PubSubClassic}, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "f", holderOf(t, s2.Slot(1)), "passed on to the next")
}

// TestSemaphorePermitsLapse: the permits key expires a counter ttl after
// its last change; a release that finds it missing frees its slot and
// wakes the waiters, and the next try writes it again.
func TestSemaphorePermitsLapse(t *testing.T) {
	s := semFor(t, 1)
	short := protocol.Counter{TTL: 300 * time.Millisecond}
	try := func(h string, a protocol.Attempt) protocol.PermitResult {
		r, err := protocol.AcquirePermit(t.Context(), rdb, s, protocol.Try{Holder: h, TTL: 10 * time.Second, Counter: short, Attempt: a, PubSub: protocol.PubSubClassic})
		require.NoError(t, err)
		return r
	}
	require.Equal(t, protocol.Acquired, try("a", 0).Outcome)
	require.Positive(t, pttl(t, s.Permits))
	b := protocol.NewAttempt()
	require.Equal(t, protocol.Held, try("b", b).Outcome)
	require.Eventually(t, func() bool { return !exists(t, s.Permits) }, 5*time.Second, 20*time.Millisecond)
	sub := subscribe(t, s.Keys, false)
	require.True(t, release(t, s, 0, "a"))
	p, ok := sub.next(2 * time.Second)
	require.True(t, ok)
	require.Equal(t, "", p, "a plain wake-up, no handoff")
	require.Equal(t, protocol.Acquired, try("b", b).Outcome)
	require.Equal(t, "1", mustGet(t, s.Permits))
}
