package lease_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

func TestMutualExclusion(t *testing.T) {
	c := countingClient(t)
	mutualExclusion(t, c, counting(t, shared, name(t)), 16, 40)
}

// mutualExclusion runs workers × rounds waiting acquisitions of one lock
// with a long ttl and checks that no two holding periods overlap and that
// every token is greater than the one before.
func mutualExclusion(t *testing.T, c *lease.Client, lock string, workers, rounds int) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		lastSeq  uint64 // only touched while holding the lock
		backward atomic.Int32
		total    atomic.Int32
		wg       sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := c.Acquire(ctx, lock, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				if seq := l.Token().Seq; seq <= lastSeq {
					backward.Add(1)
				} else {
					lastSeq = seq
				}
				total.Add(1)
				time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(workers*rounds), total.Load())
	assert.Zero(t, overlaps.Load(), "holding periods overlapped")
	assert.Zero(t, backward.Load(), "a token was not greater than the one before")
	assert.Equal(t, uint64(workers*rounds), lastSeq, "one Seq per acquisition, none skipped")
}

func TestTryAcquireHeld(t *testing.T) {
	c := countingClient(t)
	n := counting(t, shared, name(t))
	a, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, fence.Token{Key: n, Seq: 1, Holder: a.Holder()}, a.Token())

	_, err = c.TryAcquire(t.Context(), n, time.Minute)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	var held *lease.HeldError
	require.ErrorAs(t, err, &held)
	assert.InDelta(t, time.Minute, held.Remaining, float64(time.Second))

	require.NoError(t, a.Release(t.Context()))
	require.NoError(t, a.Release(t.Context()), "release is idempotent")
	assert.ErrorIs(t, a.Err(), lease.ErrReleased)
	b, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), b.Token().Seq)
	require.NoError(t, b.Release(t.Context()))
}

func TestNonHolderCannotRefreshOrRelease(t *testing.T) {
	c := newClient(t, lease.WithDriftFactor(0))
	n := name(t)
	old, err := c.TryAcquire(t.Context(), n, 50*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(80 * time.Millisecond) // old expires in Redis
	cur, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)

	assert.ErrorIs(t, old.Refresh(t.Context(), time.Minute), lease.ErrLost)
	assert.ErrorIs(t, old.Release(t.Context()), lease.ErrLost)

	info, err := c.Inspect(t.Context(), n)
	require.NoError(t, err)
	assert.Equal(t, cur.Token(), info.Token, "the current holder keeps the lock")
	assert.Greater(t, info.TTL, 50*time.Second, "its ttl was not touched")
	assert.NoError(t, cur.Refresh(t.Context(), time.Minute))
	assert.NoError(t, cur.Release(t.Context()))
}

func TestRefreshAfterDeleteReportsLost(t *testing.T) {
	c := newClient(t)
	n := name(t)
	l, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	require.NoError(t, shared.Del(t.Context(), "fencelock:{"+n+"}").Err())

	err = l.Refresh(t.Context(), time.Minute)
	require.ErrorIs(t, err, lease.ErrLost)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after a refresh found the lock gone")
	}
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
	assert.False(t, l.Held())
}

func TestKeepAliveHoldsAndReportsLoss(t *testing.T) {
	c := newClient(t)
	n := name(t)
	ttl := 300 * time.Millisecond
	l, err := c.TryAcquire(t.Context(), n, ttl, lease.WithKeepAlive(0))
	require.NoError(t, err)

	time.Sleep(6 * ttl)
	assert.NoError(t, l.Err(), "keep-alive held the lease across 6 ttls")
	info, err := c.Inspect(t.Context(), n)
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token)
	_, err = c.TryAcquire(t.Context(), n, ttl)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)

	require.NoError(t, shared.Del(t.Context(), "fencelock:{"+n+"}").Err())
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("keep-alive did not report the deleted key")
	}
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
	assert.Contains(t, l.Err().Error(), "no longer held", "lost by a refresh, not by the deadline")
}

func TestWaiterWakesOnRelease(t *testing.T) {
	// With a 10 s backoff only the release message can wake the waiter soon.
	c := newClient(t, lease.WithBackoff(10*time.Second, 10*time.Second))
	n := name(t)
	a, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)

	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := c.Acquire(t.Context(), n, time.Minute)
		assert.NoError(t, err)
		got <- l
	}()
	waitSubscribed(t, "fencelock:{"+n+"}:release")

	released := time.Now()
	require.NoError(t, a.Release(t.Context()))
	select {
	case b := <-got:
		assert.Less(t, time.Since(released), time.Second)
		assert.Greater(t, b.Token().Seq, a.Token().Seq)
		require.NoError(t, b.Release(t.Context()))
	case <-time.After(5 * time.Second):
		t.Fatal("waiter was not woken by the release")
	}
}

func TestWaiterAfterExpiry(t *testing.T) {
	c := newClient(t, lease.WithBackoff(10*time.Second, 10*time.Second))
	n := name(t)
	ttl := 200 * time.Millisecond
	a, err := c.TryAcquire(t.Context(), n, ttl)
	require.NoError(t, err)
	start := time.Now()
	b, err := c.Acquire(t.Context(), n, time.Minute)
	require.NoError(t, err, "the holder's remaining ttl wakes the waiter, not the 10 s backoff")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Greater(t, b.Token().Seq, a.Token().Seq)
	require.NoError(t, b.Release(t.Context()))
}

func TestAcquireContextEnds(t *testing.T) {
	c := countingClient(t)
	n := counting(t, shared, name(t))
	a, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	defer a.Release(context.Background())

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, n, time.Minute)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = c.Acquire(ctx, n, time.Minute)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Eventually(t, func() bool { return numSub(t, "fencelock:{"+n+"}:release") == 0 }, 5*time.Second, time.Millisecond,
		"waiter unsubscribed")
}

func TestReacquireWithHolder(t *testing.T) {
	c := countingClient(t)
	n := counting(t, shared, name(t))
	a, err := c.TryAcquire(t.Context(), n, 10*time.Second)
	require.NoError(t, err)

	// A restarted process that saved a.Holder() gets the same token back.
	again, err := c.TryAcquire(t.Context(), n, time.Minute, lease.WithHolder(a.Holder()))
	require.NoError(t, err)
	assert.Equal(t, a.Token(), again.Token())
	info, err := c.Inspect(t.Context(), n)
	require.NoError(t, err)
	assert.Greater(t, info.TTL, 30*time.Second, "the ttl was extended")
	assert.Equal(t, a.Token().Seq, info.LastSeq, "no new Seq was issued")

	// Another holder id is refused; once free, the known id gets a new token.
	_, err = c.TryAcquire(t.Context(), n, time.Minute, lease.WithHolder("someone-else"))
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	require.NoError(t, again.Release(t.Context()))
	next, err := c.TryAcquire(t.Context(), n, time.Minute, lease.WithHolder(a.Holder()))
	require.NoError(t, err)
	assert.Equal(t, a.Token().Seq+1, next.Token().Seq)
	require.NoError(t, next.Release(t.Context()))
}

func TestInspectAndAdvance(t *testing.T) {
	c := countingClient(t)
	n := counting(t, shared, name(t))
	info, err := c.Inspect(t.Context(), n)
	require.NoError(t, err)
	assert.Equal(t, lease.Info{Name: n}, info, "a lock never used")

	got, err := c.Advance(t.Context(), n, 1000)
	require.NoError(t, err)
	assert.Equal(t, uint64(1000), got)
	got, err = c.Advance(t.Context(), n, 10)
	require.NoError(t, err)
	assert.Equal(t, uint64(1000), got, "advance never lowers the counter")

	l, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint64(1001), l.Token().Seq)
	info, err = c.Inspect(t.Context(), n)
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token)
	assert.Equal(t, uint64(1001), info.LastSeq)
	require.NoError(t, l.Release(t.Context()))

	_, err = c.Advance(t.Context(), n, fence.MaxSeq)
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

func TestBadInputBeforeIO(t *testing.T) {
	// A client for a port nobody listens on: any I/O would fail differently.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	c, err := lease.New(dead)
	require.NoError(t, err)
	ctx := t.Context()

	_, err = lease.New(nil)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.New(dead, lease.WithPrefix("a{b"))
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.New(dead, lease.WithDriftFactor(0.7))
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.New(dead, lease.WithBackoff(0, time.Second))
	assert.ErrorIs(t, err, lease.ErrInvalid)

	for what, call := range map[string]func() error{
		"empty name":   func() error { _, err := c.TryAcquire(ctx, "", time.Second); return err },
		"long name":    func() error { _, err := c.Acquire(ctx, strings.Repeat("x", 513), time.Second); return err },
		"brace":        func() error { _, err := c.TryAcquire(ctx, "a{b}", time.Second); return err },
		"ttl below ms": func() error { _, err := c.TryAcquire(ctx, "a", 999*time.Microsecond); return err },
		"zero ttl":     func() error { _, err := c.Acquire(ctx, "a", 0); return err },
		"bad holder": func() error {
			_, err := c.TryAcquire(ctx, "a", time.Second, lease.WithHolder("a:b"))
			return err
		},
		"inspect": func() error { _, err := c.Inspect(ctx, ""); return err },
		"advance": func() error { _, err := c.Advance(ctx, "}", 1); return err },
	} {
		err := call()
		assert.ErrorIs(t, err, lease.ErrInvalid, what)
		assert.NotContains(t, err.Error(), "connect", what)
	}
	var nilClient *lease.Client
	_, err = nilClient.TryAcquire(ctx, "a", time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// lostReply runs every command for real but replaces the first EVALSHA
// reply with a timeout, as if the reply were lost on the way back: sent
// alone or in a pipeline (the client's batched script calls).
type lostReply struct{ fired atomic.Bool }

func (h *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.lose(cmd)
		}
		return err
	}
}
func (h *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := next(ctx, cmd); err != nil {
			return err
		}
		return h.lose(cmd)
	}
}

// lose replaces cmd's reply with a timeout if it is the first EVALSHA.
func (h *lostReply) lose(cmd redis.Cmder) error {
	if cmd.Name() == "evalsha" && cmd.Err() == nil && h.fired.CompareAndSwap(false, true) {
		cmd.SetErr(context.DeadlineExceeded)
	}
	return cmd.Err()
}

func TestLostReplyReleases(t *testing.T) {
	r, _ := ownRedis(t)
	rdb := r.Client()
	defer rdb.Close()
	// Load the scripts first, so the first EVALSHA is the acquire.
	warm, err := lease.New(rdb, lease.WithCounterTTL(0))
	require.NoError(t, err)
	l, err := warm.TryAcquire(t.Context(), "warm", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))

	rdb.AddHook(&lostReply{})
	c, err := lease.New(rdb, lease.WithCounterTTL(0))
	require.NoError(t, err)
	counting(t, rdb, "k")
	_, err = c.TryAcquire(t.Context(), "k", time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	info, err := c.Inspect(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.LastSeq, "the acquire did run on the server")
	assert.Empty(t, info.Holder, "and its lock was released, not left for an hour")
	l, err = c.TryAcquire(t.Context(), "k", time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), l.Token().Seq)
}

func TestRedisStoppedMidRun(t *testing.T) {
	r, rdb := ownRedis(t)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	held, err := c.TryAcquire(ctx, "held", time.Second, lease.WithKeepAlive(100*time.Millisecond))
	require.NoError(t, err)
	other, err := c.TryAcquire(ctx, "waited", time.Minute)
	require.NoError(t, err)

	waiting := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "waited", time.Minute)
		waiting <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, r.Stop())

	start := time.Now()
	_, err = c.TryAcquire(ctx, "x", time.Second)
	assert.Error(t, err)
	assert.NotErrorIs(t, err, lease.ErrNotAcquired, "an outage is not 'held by another'")
	assert.Error(t, other.Refresh(ctx, time.Minute))
	assert.Error(t, other.Release(ctx))
	_, err = c.Inspect(ctx, "x")
	assert.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "errors, not hangs")

	select {
	case err := <-waiting:
		assert.Error(t, err, "the waiter gave up with an error")
	case <-time.After(15 * time.Second):
		t.Fatal("waiting Acquire hung after Redis stopped")
	}
	select {
	case <-held.Done():
		assert.ErrorIs(t, held.Err(), lease.ErrLost, "keep-alive could not refresh: lost at the deadline")
	case <-time.After(5 * time.Second):
		t.Fatal("keep-alive lease did not end while Redis was down")
	}

	require.NoError(t, r.Start(ctx))
	l, err := c.TryAcquire(ctx, "x", time.Second)
	require.NoError(t, err, "works again after a restart")
	require.NoError(t, l.Release(ctx))
}

func TestScriptFlushSurvived(t *testing.T) {
	_, rdb := ownRedis(t)
	c, err := lease.New(rdb, lease.WithCounterTTL(0))
	require.NoError(t, err)
	ctx := t.Context()
	counting(t, rdb, "k")
	for i := 0; i < 3; i++ {
		l, err := c.TryAcquire(ctx, "k", time.Minute)
		require.NoError(t, err)
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		require.NoError(t, l.Refresh(ctx, time.Minute))
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		require.NoError(t, l.Release(ctx))
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		assert.Equal(t, uint64(i+1), l.Token().Seq)
	}
}

// waitSubscribed waits until some client subscribes to channel.
func waitSubscribed(t *testing.T, channel string) {
	t.Helper()
	require.Eventually(t, func() bool { return numSub(t, channel) > 0 }, 5*time.Second, time.Millisecond)
}

func numSub(t *testing.T, channel string) int {
	t.Helper()
	m, err := shared.PubSubNumSub(t.Context(), channel).Result()
	require.NoError(t, err)
	return int(m[channel])
}

// TestNoGoroutineLeak: waiting acquires that time out, keep-alives that end
// and releases leave no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	c := newClient(t)
	n := name(t)
	before := runtime.NumGoroutine()
	holder, err := c.TryAcquire(t.Context(), n, time.Minute, lease.WithKeepAlive(10*time.Millisecond))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			_, err := c.Acquire(ctx, n, time.Minute)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		}()
	}
	wg.Wait()
	require.NoError(t, holder.Release(t.Context()))
	// Polled here, not with assert.Eventually, whose own goroutine would count.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if !assert.LessOrEqual(t, after, before, "goroutines left behind") {
		buf := make([]byte, 1<<16)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
}
