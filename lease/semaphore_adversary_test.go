package lease_test

// Adversarial schedules against the semaphore (issue 32), each checked on
// a real redis-server against a promise of lease/semaphore.go's doc and
// docs/design.md "The semaphore": never more than N valid holders, a slot's
// tokens grow, no permit stranded (a free slot while a live waiter waits)
// for longer than the claim window and a poll, the longest live waiter is
// served, a release or leave loses no slot.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
)

// advResult is an Acquire's outcome, with when it returned.
type advResult struct {
	l   *lease.Lease
	err error
	at  time.Time
}

// goAcquire runs acquire in a goroutine; its result comes on the channel.
func goAcquire(acquire func() (*lease.Lease, error)) <-chan advResult {
	ch := make(chan advResult, 1)
	go func() {
		l, err := acquire()
		ch <- advResult{l, err, time.Now()}
	}()
	return ch
}

// maxPoll is the longest a queued waiter waits between two tries (the
// Poll of internal/quorum's Try: a jitter of min(MaxBackoff, TicketTTL/3)).
const maxPoll = protocol.TicketTTL / 3

// semState describes the semaphore's state for a failure message.
func semState(t *testing.T, s *lease.Semaphore) string {
	t.Helper()
	info, err := s.Inspect(context.Background())
	if err != nil {
		return err.Error()
	}
	held := ""
	for _, h := range info.Holders {
		held += fmt.Sprintf(" slot %d: %s (ttl %v);", h.Slot, h.Holder, h.TTL.Round(time.Millisecond))
	}
	return fmt.Sprintf("permits key %d, held:%s queue %v", info.Permits, held, info.Queue)
}

// TestSemaphoreAdversaryGrowStrandsNewSlot: "Growing N opens the new slots
// to the next call" (lease/semaphore.go). A waiter of the old N, still in
// its Acquire when N grows, is the head of the queue: a try of the new N
// finds the new slot free but reserved for that head, and the head's tries
// read only the old N's slots, all held. The new slot stays free while two
// live waiters wait, until the old N's holders release.
//
// Schedule: N=2, both held for a minute; O waits with N=2; N grows to 3; G
// waits with N=3. Slot 2 is free all along: one of the two live waiters
// (O, the longest, by FIFO) must get it within the claim window and a poll.
func TestSemaphoreAdversaryGrowStrandsNewSlot(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	n := name(t)
	s2, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	for range 2 {
		h, err := s2.TryAcquire(ctx, time.Minute)
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Release(context.Background()) })
	}
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	o := goAcquire(func() (*lease.Lease, error) { return s2.Acquire(wctx, time.Minute) })
	waitSemQueued(t, shared, n, 1)

	s3, err := c.Semaphore(n, 3)
	require.NoError(t, err)
	grown := time.Now()
	g := goAcquire(func() (*lease.Lease, error) { return s3.Acquire(wctx, time.Minute) })
	bound := protocol.ClaimTTL(time.Minute) + maxPoll + time.Second
	var got advResult
	select {
	case got = <-o:
		o = nil
	case got = <-g:
		g = nil
	case <-time.After(bound):
		t.Errorf("slot 2 free for %v since N grew to 3; O (N=2) and G (N=3) still wait: %s", bound, semState(t, s3))
	}
	if got.l != nil || got.err != nil {
		require.NoError(t, got.err)
		t.Logf("%s was taken %v after N grew", got.l.Name(), got.at.Sub(grown).Round(time.Millisecond))
		assert.Equal(t, lease.PermitName(n, 2), got.l.Name())
		require.NoError(t, got.l.Release(ctx))
	}
	cancel()
	for _, ch := range []<-chan advResult{o, g} {
		if ch == nil {
			continue
		}
		if r := <-ch; r.l != nil {
			_ = r.l.Release(ctx)
		}
	}
}

// TestSemaphoreAdversaryDeadWaiterShortTTL: "A waiter that died costs the
// others at most the claim window (min(ttl, 2s)) and a poll"
// (lease/semaphore.go, docs/design.md). A dead waiter at the head keeps the
// queue's head for as long as its ticket lives, TicketTTL (2s) from its last
// try, whatever its ttl. When a slot frees without a release (its holder
// died), nobody hands it to the dead head (which would cost the claim
// window): the live waiters are told it is reserved until the dead head's
// ticket expires. With a ttl under 2s the cost is the ticket's 2s, not
// min(ttl, 2s).
//
// Schedule: N=1, ttl 400ms for everyone. H holds and dies; D queues, then
// dies just before H's ttl ends (its last try then); W waits behind D. W
// must get the permit within min(400ms, 2s) + a poll of H's ttl ending.
func TestSemaphoreAdversaryDeadWaiterShortTTL(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	n := name(t)
	s, err := c.Semaphore(n, 1)
	require.NoError(t, err)
	const ttl = 400 * time.Millisecond
	begun := time.Now()
	_, err = s.TryAcquire(ctx, ttl) // H: dies
	require.NoError(t, err)
	freed := begun.Add(ttl)

	// D: a waiter in another process, seen from Redis: its tries, then
	// nothing (SIGKILL).
	keys := protocol.SemaphoreFor(lease.DefaultPrefix, n, 1)
	dead := protocol.Try{Holder: "dead-waiter", TTL: ttl, Counter: protocol.Counter{TTL: lease.DefaultCounterTTL}, Attempt: protocol.NewAttempt(), PubSub: protocol.PubSubClassic}
	tryD := func() {
		r, err := protocol.AcquirePermit(ctx, shared, keys, dead)
		require.NoError(t, err)
		require.False(t, r.Got())
	}
	tryD()
	w := goAcquire(func() (*lease.Lease, error) { return s.Acquire(ctx, ttl) })
	waitSemQueued(t, shared, n, 2)
	time.Sleep(time.Until(freed.Add(-50 * time.Millisecond)))
	tryD() // D's last try: it dies now

	bound := protocol.ClaimTTL(ttl) + maxPoll + 300*time.Millisecond
	r := <-w
	require.NoError(t, r.err)
	cost := r.at.Sub(freed)
	t.Logf("W got the permit %v after H's ttl ended (claim window %v, poll up to %v)", cost.Round(time.Millisecond), protocol.ClaimTTL(ttl), maxPoll)
	assert.LessOrEqual(t, cost, bound, "a dead waiter cost the live waiter more than the claim window and a poll (+300ms)")
	require.NoError(t, r.l.Release(ctx))
}

// TestSemaphoreAdversaryHolderReuse: a holder id reused across two permits
// (WithHolder, the same id for two Acquires, for instance one id per
// worker process that takes two permits). The second try finds the slot
// the id holds and returns it again (Reacquired, the same token): one
// permit on the server, two lease objects, as with a lock under WithHolder
// (documented: one id, one permit). Once one is released, the slot passes
// on, and the other lease finds it lost at its next refresh.
func TestSemaphoreAdversaryHolderReuse(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	n := name(t)
	s, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	id := "worker-" + n[len(n)-8:]
	l1, err := s.TryAcquire(ctx, time.Minute, lease.WithHolder(id))
	require.NoError(t, err)
	l2, err := s.TryAcquire(ctx, time.Minute, lease.WithHolder(id))
	require.NoError(t, err)
	// One id is one permit on the server, as it is one lock: the second
	// try re-acquires the first's slot, with its token.
	require.Equal(t, l1.Name(), l2.Name())
	require.Equal(t, l1.Token(), l2.Token())
	require.NoError(t, l1.Release(ctx))
	x, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Release(context.Background()) })
	// The other lease object learns at its next refresh that the permit
	// is gone: a verifier would refuse its token once x wrote.
	require.ErrorIs(t, l2.Refresh(ctx, time.Minute), lease.ErrLost)
	require.Greater(t, x.Token().Seq, l2.Token().Seq)
}

// proxied returns a lease client for r whose connections (commands and
// pub/sub) go through a fault proxy, warmed up (a connection open, the
// scripts loaded).
func proxied(t *testing.T, r *testenv.Redis) (*lease.Client, *faults.Proxy) {
	t.Helper()
	px := faults.NewProxy(t, r.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	s, err := c.Semaphore(name(t), 1)
	require.NoError(t, err)
	l, err := s.TryAcquire(t.Context(), time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
	return c, px
}

// TestSemaphoreAdversaryLostTryAcquireReply: a TryAcquire whose reply is
// lost after the script took a slot (the reply delayed past the call's
// context) returns no lease and lets go of the slot (sem_leave.lua, which
// finds the slot by holder id), which goes straight to the waiter that
// queued meanwhile, with the slot's next token.
func TestSemaphoreAdversaryLostTryAcquireReply(t *testing.T) {
	ctx := t.Context()
	r := testenv.NewRedis(t)
	admin := r.Client()
	t.Cleanup(func() { admin.Close() })
	c, px := proxied(t, r)
	dc, err := lease.New(admin)
	require.NoError(t, err)
	n := name(t)
	s, err := c.Semaphore(n, 1)
	require.NoError(t, err)
	sd, err := dc.Semaphore(n, 1)
	require.NoError(t, err)
	slot := protocol.SemaphoreFor(lease.DefaultPrefix, n, 1).Slot(0).Lock

	px.DelayReplies(time.Second)
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	lost := goAcquire(func() (*lease.Lease, error) { return s.TryAcquire(tctx, time.Minute) })
	require.Eventually(t, func() bool { return admin.Exists(ctx, slot).Val() == 1 }, 5*time.Second, time.Millisecond, "the try ran")
	w := goAcquire(func() (*lease.Lease, error) { return sd.Acquire(ctx, time.Minute) })
	waitSemQueued(t, admin, n, 1)

	res := <-lost
	px.DelayReplies(0) // the link is well again: the cleanup's calls get through
	assert.Nil(t, res.l, "no lease from a TryAcquire whose reply came after its context")
	assert.ErrorIs(t, res.err, lease.ErrNotAcquired)
	assert.ErrorIs(t, res.err, context.DeadlineExceeded)
	select {
	case got := <-w:
		require.NoError(t, got.err)
		t.Logf("the waiter got %s %v after the TryAcquire gave up", got.l.Name(), got.at.Sub(res.at).Round(time.Millisecond))
		assert.Equal(t, lease.PermitName(n, 0), got.l.Name())
		info, err := sd.Inspect(ctx)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		assert.Equal(t, got.l.Token(), info.Holders[0].Token)
		require.NoError(t, got.l.Release(ctx))
	case <-time.After(5 * time.Second):
		t.Errorf("the slot the lost try took was not passed on to the waiter: %s", semState(t, sd))
	}
}

// TestSemaphoreAdversaryGiveUpAfterHandoff: a waiter W whose Acquire ends
// (its context) after a release handed it the slot, and after one of its
// tries found the slot its own (Reacquired: the try reset the slot's ttl to
// W's whole ttl) but before that try's reply came back. W's Acquire fails,
// and it must not leave the slot held by nobody: the next waiter X must
// get it within the claim window and a poll. With a fresh holder id the
// failed try's cleanup passes the slot on; under WithHolder neither the
// cleanup (only a fresh Acquired is undone for a re-acquire) nor the leave
// (passOn false for a re-acquire) does, and the slot stays held by W's id,
// whose Acquire gave up, for W's whole ttl.
func TestSemaphoreAdversaryGiveUpAfterHandoff(t *testing.T) {
	for _, withHolder := range []bool{false, true} {
		t.Run(map[bool]string{false: "fresh id", true: "WithHolder"}[withHolder], func(t *testing.T) {
			ctx := t.Context()
			r := testenv.NewRedis(t)
			admin := r.Client()
			t.Cleanup(func() { admin.Close() })
			cw, px := proxied(t, r)
			dc, err := lease.New(admin)
			require.NoError(t, err)
			n := name(t)
			sw, err := cw.Semaphore(n, 1)
			require.NoError(t, err)
			sd, err := dc.Semaphore(n, 1)
			require.NoError(t, err)
			slot := protocol.SemaphoreFor(lease.DefaultPrefix, n, 1).Slot(0).Lock

			h, err := sd.TryAcquire(ctx, time.Minute)
			require.NoError(t, err)
			var opts []lease.AcquireOption
			if withHolder {
				opts = append(opts, lease.WithHolder("w-"+n[len(n)-8:]))
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			w := goAcquire(func() (*lease.Lease, error) { return sw.Acquire(wctx, time.Minute, opts...) })
			waitSemQueued(t, admin, n, 1)
			x := goAcquire(func() (*lease.Lease, error) { return sd.Acquire(ctx, time.Minute) })
			waitSemQueued(t, admin, n, 2)

			// W's replies (its tries' and its release messages) now come 2s
			// late; its requests reach Redis at once.
			px.DelayReplies(2 * time.Second)
			require.NoError(t, h.Release(ctx)) // hands slot 0 to W, for the claim window
			// W's next poll finds the slot its own and resets its ttl to W's
			// minute; its reply is on the way.
			require.Eventually(t, func() bool { return admin.PTTL(ctx, slot).Val() > 10*time.Second }, 3*time.Second, time.Millisecond,
				"W's try found the handed slot its own")
			cancel()
			gaveUp := time.Now()
			res := <-w
			px.DelayReplies(0)
			if res.l != nil {
				t.Skipf("W's Acquire returned a lease (err %v): the schedule was not reached", res.err)
			}
			assert.ErrorIs(t, res.err, context.Canceled)

			bound := protocol.ClaimTTL(time.Minute) + maxPoll + 3*time.Second // + the delayed reply a cleanup waits for
			select {
			case got := <-x:
				require.NoError(t, got.err)
				t.Logf("X got %s %v after W gave up", got.l.Name(), got.at.Sub(gaveUp).Round(time.Millisecond))
				require.NoError(t, got.l.Release(ctx))
			case <-time.After(bound):
				t.Errorf("W gave up %v ago and X, the only live waiter, still waits: %s", bound, semState(t, sd))
			}
		})
	}
}

// TestSemaphoreAdversaryRestart: the counter rule per slot. Redis restarts
// without persistence (every slot's counter lost); the next permits, taken
// by a try and handed by a release, carry tokens above every token their
// slot issued before.
func TestSemaphoreAdversaryRestart(t *testing.T) {
	ctx := t.Context()
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	n := name(t)
	s, err := c.Semaphore(n, 3)
	require.NoError(t, err)
	last := map[string]uint64{}
	for range 3 { // each slot's counter well above its first token
		var ls []*lease.Lease
		for range 3 {
			l, err := s.TryAcquire(ctx, time.Minute)
			require.NoError(t, err)
			ls = append(ls, l)
		}
		for _, l := range ls {
			last[l.Name()] = max(last[l.Name()], l.Token().Seq)
			require.NoError(t, l.Release(ctx))
		}
	}
	require.NoError(t, faults.Restart(ctx, r))
	require.Eventually(t, func() bool { k, err := rdb.DBSize(ctx).Result(); return err == nil && k == 0 },
		10*time.Second, 10*time.Millisecond, "Redis came back empty: every slot's counter lost")

	var held []*lease.Lease
	for range 3 {
		var l *lease.Lease
		require.Eventually(t, func() bool {
			l, err = s.TryAcquire(ctx, time.Minute)
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "after the restart: %v", err)
		assert.Greater(t, l.Token().Seq, last[l.Name()], "%s's token after the restart", l.Name())
		last[l.Name()] = l.Token().Seq
		held = append(held, l)
	}
	w := goAcquire(func() (*lease.Lease, error) { return s.Acquire(ctx, time.Minute) })
	waitSemQueued(t, rdb, n, 1)
	require.NoError(t, held[1].Release(ctx))
	got := <-w
	require.NoError(t, got.err)
	assert.Equal(t, held[1].Name(), got.l.Name())
	assert.Greater(t, got.l.Token().Seq, last[got.l.Name()], "the handed slot's token")
	for _, l := range []*lease.Lease{held[0], held[2], got.l} {
		require.NoError(t, l.Release(ctx))
	}
}

// TestSemaphoreAdversaryWithHolderRestart: a holder that restarted
// (WithHolder, a new client) gets its own permit back, the same slot with
// the same token, although a waiter is queued and the queue is FIFO: its
// slot was never free, and is not handed to the waiter meanwhile.
func TestSemaphoreAdversaryWithHolderRestart(t *testing.T) {
	ctx := t.Context()
	n := name(t)
	s, err := newClient(t).Semaphore(n, 2)
	require.NoError(t, err)
	other, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	id := "restarts-" + n[len(n)-8:]
	before, err := s.TryAcquire(ctx, time.Minute, lease.WithHolder(id))
	require.NoError(t, err)
	require.Equal(t, lease.PermitName(n, 1), before.Name())
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := goAcquire(func() (*lease.Lease, error) { return s.Acquire(wctx, time.Minute) })
	waitSemQueued(t, shared, n, 1)

	// The process restarts: a new client, the saved holder id; the old
	// lease object is gone with the old process.
	again, err := newClient(t).Semaphore(n, 2)
	require.NoError(t, err)
	after, err := again.Acquire(ctx, time.Minute, lease.WithHolder(id))
	require.NoError(t, err)
	assert.Equal(t, before.Name(), after.Name())
	assert.Equal(t, before.Token(), after.Token(), "the same permit, with the same token")
	select {
	case r := <-w:
		t.Fatalf("the queued waiter got %v (err %v) while both permits are held", r.l, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, after.Release(ctx))
	r := <-w
	require.NoError(t, r.err)
	assert.Equal(t, after.Name(), r.l.Name())
	assert.Greater(t, r.l.Token().Seq, after.Token().Seq)
	require.NoError(t, r.l.Release(ctx))
	require.NoError(t, other.Release(ctx))
}
