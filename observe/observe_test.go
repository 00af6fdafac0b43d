package observe_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// recorder keeps every event, for tests.
type recorder struct {
	mu       sync.Mutex
	started  []observe.AcquireStart
	done     []observe.AcquireDone
	refresh  []observe.Refreshed
	lost     []observe.Lost
	released []observe.Released
	verified []observe.Verified
}

type ctxKey struct{}

func (r *recorder) hooks() *observe.Hooks {
	return &observe.Hooks{
		AcquireStart: func(ctx context.Context, e observe.AcquireStart) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.started = append(r.started, e)
			return context.WithValue(ctx, ctxKey{}, e.Name)
		},
		AcquireDone: func(ctx context.Context, e observe.AcquireDone) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if ctx.Value(ctxKey{}) != e.Name {
				panic("AcquireDone did not get AcquireStart's context")
			}
			r.done = append(r.done, e)
		},
		Refreshed: func(_ context.Context, e observe.Refreshed) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.refresh = append(r.refresh, e)
		},
		Lost: func(e observe.Lost) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.lost = append(r.lost, e)
		},
		Released: func(_ context.Context, e observe.Released) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.released = append(r.released, e)
		},
		Verified: func(_ context.Context, e observe.Verified) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.verified = append(r.verified, e)
		},
	}
}

func (r *recorder) lostCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lost)
}

func TestLeaseEvents(t *testing.T) {
	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	var rec recorder
	c, err := lease.New(rdb, lease.WithHooks(rec.hooks()))
	require.NoError(t, err)
	ctx := t.Context()

	l, err := c.TryAcquire(ctx, "jobs/a", time.Minute)
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, "jobs/a", time.Minute)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Acquire(short, "jobs/a", time.Minute)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A waiter woken by the release: a handoff.
	got := make(chan *lease.Lease)
	go func() {
		w, err := c.Acquire(ctx, "jobs/a", time.Minute)
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool {
		n, _ := rdb.PubSubNumSub(ctx, "fencelock:{jobs/a}:release").Result()
		return n["fencelock:{jobs/a}:release"] == 1
	}, 5*time.Second, 5*time.Millisecond, "the waiter subscribed")
	// Let it make its next try and wait for the release message (a release
	// before that try is picked up by the try: no handoff message).
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, l.Refresh(ctx, time.Minute))
	require.NoError(t, l.Release(ctx))
	w := <-got
	require.NoError(t, w.Release(ctx))

	// A lease lost by its deadline.
	gone, err := c.TryAcquire(ctx, "jobs/b", 20*time.Millisecond)
	require.NoError(t, err)
	<-gone.Done()
	require.Eventually(t, func() bool { return rec.lostCount() == 1 }, 5*time.Second, 5*time.Millisecond)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.started, 5)
	require.Len(t, rec.done, 5)
	outcomes := []observe.Outcome{}
	for _, d := range rec.done {
		outcomes = append(outcomes, d.Outcome)
		assert.Equal(t, observe.KindLease, d.Kind)
	}
	// The waiter's AcquireDone comes after the busy and canceled ones.
	assert.Equal(t, []observe.Outcome{observe.Acquired, observe.Busy, observe.Canceled, observe.Acquired, observe.Acquired}, outcomes)
	assert.Equal(t, l.Token(), rec.done[0].Token)
	assert.Equal(t, 1, rec.done[0].Attempts)
	assert.False(t, rec.done[0].Waiting)
	assert.True(t, rec.done[3].Waiting)
	assert.True(t, rec.done[3].Handoff, "the waiter was woken by the release")
	assert.Positive(t, rec.done[3].Attempts) // 1 when its channel was already listening: the handoff needed no second try
	assert.ErrorIs(t, rec.done[1].Err, lease.ErrNotAcquired)

	require.Len(t, rec.refresh, 1)
	assert.NoError(t, rec.refresh[0].Err)
	assert.False(t, rec.refresh[0].KeepAlive)
	require.Len(t, rec.released, 2)
	assert.Equal(t, l.Token(), rec.released[0].Token)
	assert.NoError(t, rec.released[0].Err)
	assert.Positive(t, rec.released[0].Held)
	require.Len(t, rec.lost, 1)
	assert.Equal(t, gone.Token(), rec.lost[0].Token)
	assert.ErrorIs(t, rec.lost[0].Err, lease.ErrLost)
}

func TestRedlockEventsAndKeepAlive(t *testing.T) {
	rs := testenv.NewRedisN(t, 3)
	var rdbs []redis.UniversalClient
	for _, r := range rs {
		rdbs = append(rdbs, testenv.CtxClient(t, r.Addr(), 1))
	}
	var rec recorder
	c, err := redlock.New(rdbs, lease.WithHooks(rec.hooks()), redlock.WithNodeTimeout(time.Second), redlock.WithQuorumFencing(true))
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "jobs/r", 300*time.Millisecond, lease.WithKeepAlive(50*time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.refresh) >= 2
	}, 5*time.Second, 10*time.Millisecond, "keep-alive refreshes are reported")
	require.NoError(t, l.Release(t.Context()))

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.done, 1)
	assert.Equal(t, observe.KindRedlock, rec.done[0].Kind)
	assert.Equal(t, observe.Acquired, rec.done[0].Outcome)
	assert.True(t, rec.refresh[0].KeepAlive)
	assert.Equal(t, observe.KindRedlock, rec.refresh[0].Kind)
	require.Len(t, rec.released, 1)
	assert.Empty(t, rec.lost, "a released lease is not lost")
}

func TestVerifierEvents(t *testing.T) {
	var rec recorder
	m := &verifier.Memory{Hooks: rec.hooks()}
	ctx := t.Context()
	tok := func(seq uint64, holder string) fence.Token { return fence.Token{Key: "k", Seq: seq, Holder: holder} }
	require.NoError(t, m.Claim(ctx, "r", tok(5, "a")))
	require.ErrorIs(t, m.Claim(ctx, "r", tok(4, "b")), verifier.ErrStale)
	require.ErrorIs(t, m.Claim(ctx, "r", tok(5, "b")), verifier.ErrStale)
	boom := errors.New("boom")
	require.ErrorIs(t, m.Do(ctx, "r", tok(6, "c"), func() error { return boom }), boom)
	require.ErrorIs(t, m.Claim(ctx, "r", fence.Token{Key: "other", Seq: 9, Holder: "d"}), verifier.ErrForeign)

	rdb := testenv.NewRedis(t).Client()
	t.Cleanup(func() { rdb.Close() })
	rv, err := redisverifier.New(rdb, redisverifier.WithHooks(rec.hooks()))
	require.NoError(t, err)
	require.NoError(t, rv.Claim(ctx, "r", tok(2, "a")))
	require.ErrorIs(t, rv.Claim(ctx, "r", tok(1, "a")), verifier.ErrStale)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var got []string
	for _, v := range rec.verified {
		got = append(got, v.Verifier+":"+string(v.Verdict))
	}
	assert.Equal(t, []string{"memory:accepted", "memory:stale", "memory:conflict", "memory:error", "memory:foreign",
		"redis:accepted", "redis:stale"}, got)
}
