package lease_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// semQueued is how many waiters the semaphore's queue holds.
func semQueued(t testing.TB, rdb redis.UniversalClient, n string) int64 {
	t.Helper()
	q, err := rdb.ZCard(t.Context(), lease.DefaultPrefix+"{"+n+"}#queue").Result()
	require.NoError(t, err)
	return q
}

func waitSemQueued(t testing.TB, rdb redis.UniversalClient, n string, want int64) {
	t.Helper()
	require.Eventually(t, func() bool { return semQueued(t, rdb, n) == want }, 10*time.Second, time.Millisecond)
}

// TestSemaphorePermits: N holders at once, each on its own slot with its
// own tokens; the next waits and gets the slot released first, with a
// token above that slot's last; Inspect shows the holders and the queue.
func TestSemaphorePermits(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	s, err := c.Semaphore(n, 3)
	require.NoError(t, err)
	var held []*lease.Lease
	for i := range 3 {
		l, err := s.TryAcquire(ctx, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, lease.PermitName(n, i), l.Name())
		assert.Equal(t, l.Name(), l.Token().Key)
		held = append(held, l)
	}
	_, err = s.TryAcquire(ctx, time.Minute)
	var he *lease.HeldError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.Equal(t, 3, he.Permits)
	assert.Greater(t, he.Remaining, 50*time.Second)

	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := s.Acquire(ctx, time.Minute)
		assert.NoError(t, err)
		got <- l
	}()
	waitSemQueued(t, shared, n, 1)
	info, err := s.Inspect(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, info.Permits)
	require.Len(t, info.Holders, 3)
	for i, h := range info.Holders {
		assert.Equal(t, held[i].Token(), h.Token)
		assert.Equal(t, i, h.Slot)
	}
	assert.Equal(t, 1, info.Queued)
	require.Len(t, info.Queue, 1)

	require.NoError(t, held[1].Release(ctx))
	l := <-got
	require.NotNil(t, l)
	assert.Equal(t, lease.PermitName(n, 1), l.Name())
	assert.Greater(t, l.Token().Seq, held[1].Token().Seq)
	assert.True(t, l.Held())
	// The permit is an ordinary lease: refresh, reissue, release.
	require.NoError(t, l.Refresh(ctx, time.Minute))
	tok, err := l.Reissue(ctx, 0)
	require.NoError(t, err)
	assert.Greater(t, tok.Seq, l.Token().Seq-1)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, held[1].Release(ctx), "releasing again is nil")
	for _, h := range []*lease.Lease{held[0], held[2]} {
		require.NoError(t, h.Release(ctx))
	}
	info, err = s.Inspect(ctx)
	require.NoError(t, err)
	assert.Empty(t, info.Holders)
	assert.Zero(t, info.Queued)
}

// TestSemaphoreNeverMoreThanN: 20 goroutines take a permit of 3 in turn
// many times over; never more than 3 hold at once, every one gets its
// turns, and each slot's tokens grow.
func TestSemaphoreNeverMoreThanN(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	s, err := c.Semaphore(name(t), 3)
	require.NoError(t, err)
	var in, most atomic.Int32
	var mu sync.Mutex
	last := map[string]uint64{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 10 {
				l, err := s.Acquire(ctx, 5*time.Second)
				if !assert.NoError(t, err) {
					return
				}
				now := in.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				mu.Lock()
				tok := l.Token()
				assert.Greater(t, tok.Seq, last[tok.Key], "slot %s's tokens grow", tok.Key)
				last[tok.Key] = tok.Seq
				mu.Unlock()
				time.Sleep(time.Millisecond)
				in.Add(-1)
				assert.NoError(t, l.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(3))
	assert.Equal(t, int32(3), most.Load(), "3 held at once at some point")
	assert.Len(t, last, 3)
}

// TestSemaphoreFIFO: waiters get permits in the order they queued.
func TestSemaphoreFIFO(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	s, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	a, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	b, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	const waiters = 16
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			l, err := s.Acquire(ctx, time.Minute)
			if !assert.NoError(t, err) {
				return
			}
			order <- i
			time.Sleep(2 * time.Millisecond)
			assert.NoError(t, l.Release(ctx))
		})
		waitSemQueued(t, shared, n, int64(i+1))
	}
	require.NoError(t, a.Release(ctx))
	require.NoError(t, b.Release(ctx))
	wg.Wait()
	close(order)
	// Two permits: waiter i gets one no later than waiter i+2 does.
	var got []int
	for i := range order {
		got = append(got, i)
	}
	require.Len(t, got, waiters)
	for pos, i := range got {
		assert.LessOrEqual(t, i, pos+1, "waiter %d served at turn %d: %v", i, pos, got)
		assert.GreaterOrEqual(t, i, pos-1, "waiter %d served at turn %d: %v", i, pos, got)
	}
}

// TestSemaphoreShrink: a semaphore of 3 with 3 holders shrinks to 2: the
// released third slot is handed to nobody, and 2 hold from then on.
func TestSemaphoreShrink(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	s3, err := c.Semaphore(n, 3)
	require.NoError(t, err)
	var held []*lease.Lease
	for range 3 {
		l, err := s3.TryAcquire(ctx, time.Minute)
		require.NoError(t, err)
		held = append(held, l)
	}
	s2, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := s2.Acquire(ctx, time.Minute)
		assert.NoError(t, err)
		got <- l
	}()
	waitSemQueued(t, shared, n, 1)
	require.NoError(t, held[2].Release(ctx)) // the surplus slot: not handed on
	select {
	case l := <-got:
		t.Fatalf("the surplus slot was handed on: %v", l.Name())
	case <-time.After(300 * time.Millisecond):
	}
	info, err := s2.Inspect(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, info.Permits)
	assert.Len(t, info.Holders, 2)
	require.NoError(t, held[0].Release(ctx))
	l := <-got
	assert.Equal(t, lease.PermitName(n, 0), l.Name())
	require.NoError(t, l.Release(ctx))
	require.NoError(t, held[1].Release(ctx))
}

// TestSemaphoreRefused: bad input and kinds that cannot keep a semaphore.
func TestSemaphoreRefused(t *testing.T) {
	c := newClient(t)
	for _, p := range []int{0, -1, lease.MaxPermits + 1} {
		_, err := c.Semaphore("x", p)
		assert.ErrorIs(t, err, lease.ErrInvalid, "%d permits", p)
	}
	_, err := c.Semaphore("a{b", 2)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	long := fmt.Sprintf("%0510d", 0)
	_, err = c.Semaphore(long, 10) // long#9 is 512 bytes: fits
	assert.NoError(t, err)
	_, err = c.Semaphore(long+"x", 10)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	var nilc *lease.Client
	_, err = nilc.Semaphore("x", 2)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	var nils *lease.Semaphore
	_, err = nils.Acquire(t.Context(), time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid)

	var nodes []redis.UniversalClient
	for _, r := range testenv.NewRedisN(t, 3) {
		o := r.Options()
		o.ContextTimeoutEnabled, o.MaxRetries = true, -1
		rc := redis.NewClient(o)
		t.Cleanup(func() { rc.Close() })
		nodes = append(nodes, rc)
	}
	rl, err := redlock.New(nodes)
	require.NoError(t, err)
	_, err = rl.Semaphore("x", 2)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	assert.Contains(t, err.Error(), "one Redis")
	ra, err := lease.New(shared, lease.WithReplicaAck(1, time.Second))
	require.NoError(t, err)
	_, err = ra.Semaphore("x", 2)
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// TestSemaphorePermitNameIsALock: the tools that take a lock name reach a
// permit's slot by its name: Inspect shows the holder, Advance lifts the
// slot's counter, so the slot's next token is above it.
func TestSemaphorePermitNameIsALock(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	n := name(t)
	s, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	l, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	info, err := c.Inspect(ctx, l.Name())
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token)
	floor := l.Token().Seq + 1000
	_, err = c.Advance(ctx, l.Name(), floor)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	l2, err := s.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, l.Name(), l2.Name())
	assert.Greater(t, l2.Token().Seq, floor)
	require.NoError(t, l2.Release(ctx))
}

// TestSemaphoreCluster: permits and handoff on a 3-master Redis Cluster
// (every key in the name's slot, the channel sharded).
func TestSemaphoreCluster(t *testing.T) {
	cl := testenv.NewCluster(t, 3)
	rdb := cl.Client()
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	for i := range 4 { // names on every master
		n := fmt.Sprintf("sem-cluster-%d", i)
		s, err := c.Semaphore(n, 2)
		require.NoError(t, err)
		a, err := s.TryAcquire(ctx, time.Minute)
		require.NoError(t, err)
		b, err := s.TryAcquire(ctx, time.Minute)
		require.NoError(t, err)
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := s.Acquire(ctx, time.Minute)
			assert.NoError(t, err)
			got <- l
		}()
		waitSemQueued(t, rdb, n, 1)
		require.NoError(t, b.Release(ctx))
		w := <-got
		require.NotNil(t, w)
		assert.Equal(t, b.Name(), w.Name())
		assert.Greater(t, w.Token().Seq, b.Token().Seq)
		require.NoError(t, w.Release(ctx))
		require.NoError(t, a.Release(ctx))
	}
}

// TestSemaphoreSlotIsNoLock: a permit's name cannot be taken as a lock (it
// would skip the semaphore's queue and N), but Inspect and Advance take it.
func TestSemaphoreSlotIsNoLock(t *testing.T) {
	c := newClient(t)
	for _, n := range []string{"jobs#0", "jobs#63"} {
		_, err := c.TryAcquire(t.Context(), n, time.Second)
		assert.ErrorIs(t, err, lease.ErrInvalid, n)
		_, err = c.Acquire(t.Context(), n, time.Second)
		assert.ErrorIs(t, err, lease.ErrInvalid, n)
		assert.ErrorContains(t, err, `Client.Semaphore("jobs", n)`)
	}
	for _, n := range []string{"jobs#64", "jobs#01", "jobs#x"} { // no permit's names: locks
		l, err := c.TryAcquire(t.Context(), name(t)+"/"+n, time.Second)
		require.NoError(t, err, n)
		require.NoError(t, l.Release(t.Context()))
	}
}
