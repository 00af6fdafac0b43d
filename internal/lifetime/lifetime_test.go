package lifetime_test

// Unit tests of the shared lease lifetime, against a fake Backend that
// injects results and delays at exact points. No Redis. Timing assertions
// are one-sided ("eventually", "at least") so that a loaded machine cannot
// make them fail.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/observe"
)

var (
	errLost     = errors.New("test: lost")
	errReleased = errors.New("test: released")
	errInvalid  = errors.New("test: invalid")
	errBoom     = errors.New("test: boom")
)

const (
	waitFor = 5 * time.Second
	tick    = 2 * time.Millisecond
	factor  = 0.01
)

var tok0 = fence.Token{Key: "jobs/a", Seq: 10, Holder: "h1"}

func config() lifetime.Config {
	return lifetime.Config{Lost: errLost, Released: errReleased, Invalid: errInvalid, DriftFactor: factor,
		Kind: observe.KindLease}
}

// fake is a Backend whose calls run the given functions (n is the 1-based
// number of the call of that method). It counts calls, and records the
// ttls, tokens and floors it was given and whether two calls ever
// overlapped.
// The functions are set before Start and not changed afterwards.
type fake struct {
	refreshFn func(ctx context.Context, n int, ttl time.Duration) error
	releaseFn func(ctx context.Context, n int) error
	reissueFn func(ctx context.Context, n int, floor uint64) (uint64, error)

	refreshes, releases, reissues atomic.Int64
	active                        atomic.Int64
	overlap                       atomic.Bool

	mu     sync.Mutex
	ttls   []time.Duration
	toks   []fence.Token // the tokens Refresh was given
	floors []uint64
}

func (f *fake) enter() func() {
	if f.active.Add(1) > 1 {
		f.overlap.Store(true)
	}
	return func() { f.active.Add(-1) }
}

func (f *fake) Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error {
	defer f.enter()()
	n := int(f.refreshes.Add(1))
	f.mu.Lock()
	f.ttls = append(f.ttls, ttl)
	f.toks = append(f.toks, tok)
	f.mu.Unlock()
	if f.refreshFn == nil {
		return nil
	}
	return f.refreshFn(ctx, n, ttl)
}

func (f *fake) Release(ctx context.Context) error {
	defer f.enter()()
	n := int(f.releases.Add(1))
	if f.releaseFn == nil {
		return nil
	}
	return f.releaseFn(ctx, n)
}

func (f *fake) Reissue(ctx context.Context, floor uint64) (uint64, error) {
	defer f.enter()()
	n := int(f.reissues.Add(1))
	f.mu.Lock()
	f.floors = append(f.floors, floor)
	f.mu.Unlock()
	if f.reissueFn == nil {
		return floor + 1, nil
	}
	return f.reissueFn(ctx, n, floor)
}

func (f *fake) lastFloor() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.floors[len(f.floors)-1]
}

func (f *fake) toksSeen() []fence.Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fence.Token(nil), f.toks...)
}

func (f *fake) ttlsSeen() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.ttls...)
}

// rec records the hooks' events.
type rec struct {
	mu        sync.Mutex
	refreshed []observe.Refreshed
	lost      []observe.Lost
	released  []observe.Released
}

func (r *rec) hooks() *observe.Hooks {
	return &observe.Hooks{
		Refreshed: func(_ context.Context, e observe.Refreshed) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.refreshed = append(r.refreshed, e)
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
	}
}

func (r *rec) snapshot() (refreshed []observe.Refreshed, lost []observe.Lost, released []observe.Released) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(refreshed, r.refreshed...), append(lost, r.lost...), append(released, r.released...)
}

// start starts a lifetime that the test ends at cleanup (which stops its
// keep-alive).
func start(t *testing.T, b lifetime.Backend, at time.Time, ttl time.Duration, cfg lifetime.Config) *lifetime.Life {
	t.Helper()
	l := lifetime.Start(b, tok0, at, ttl, cfg)
	t.Cleanup(func() { l.End(errReleased) })
	return l
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ---- Start ----

func TestStartDeadlineAndState(t *testing.T) {
	at := time.Now().Add(-time.Second)
	ttl := time.Minute
	f := &fake{}
	l := start(t, f, at, ttl, config())

	assert.True(t, l.Deadline().Equal(at.Add(ttl-lifetime.Drift(ttl, factor))), "deadline = start + ttl − drift")
	assert.Equal(t, at.Add(ttl-time.Duration(float64(ttl)*factor)-lifetime.DriftFloor), l.Deadline())
	assert.True(t, l.Held())
	assert.NoError(t, l.Err())
	assert.False(t, closed(l.Done()))
	assert.NoError(t, l.Context().Err())
	assert.Equal(t, tok0, l.Token())
	assert.Zero(t, f.refreshes.Load()+f.releases.Load()+f.reissues.Load(), "Start does no I/O")
}

func TestStartPastDeadlineEndsAtOnce(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	l := start(t, &fake{}, time.Now().Add(-2*time.Second), time.Second, cfg)

	assert.False(t, l.Held(), "the deadline has passed")
	require.Eventually(t, func() bool { return closed(l.Done()) }, waitFor, tick)
	require.ErrorIs(t, l.Err(), errLost)
	assert.NotErrorIs(t, l.Err(), errReleased)
	assert.ErrorIs(t, l.Context().Err(), context.Canceled)
	assert.Equal(t, l.Err(), context.Cause(l.Context()), "the context's cause is Err")

	require.Eventually(t, func() bool { _, lost, _ := r.snapshot(); return len(lost) == 1 }, waitFor, tick)
	_, lost, released := r.snapshot()
	assert.Equal(t, observe.KindLease, lost[0].Kind)
	assert.Equal(t, tok0, lost[0].Token)
	assert.ErrorIs(t, lost[0].Err, errLost)
	assert.GreaterOrEqual(t, lost[0].Held, 2*time.Second, "held from the start of the acquire")
	assert.Empty(t, released)
}

func TestDeadlineAheadExpires(t *testing.T) {
	l := start(t, &fake{}, time.Now(), 50*time.Millisecond, config())
	require.Eventually(t, func() bool { return closed(l.Done()) }, waitFor, tick)
	assert.ErrorIs(t, l.Err(), errLost)
	assert.False(t, l.Held())
}

// ---- Refresh ----

func TestRefreshMovesDeadlineFromItsStart(t *testing.T) {
	var entered time.Time
	f := &fake{refreshFn: func(ctx context.Context, n int, ttl time.Duration) error {
		entered = time.Now()
		time.Sleep(30 * time.Millisecond) // the deadline counts from before this
		return nil
	}}
	l := start(t, f, time.Now(), time.Minute, config())
	old := l.Deadline()

	ttl := 2 * time.Minute
	before := time.Now()
	require.NoError(t, l.Refresh(t.Context(), ttl))
	v := lifetime.Validity(ttl, factor)
	d := l.Deadline()
	assert.False(t, d.Before(before.Add(v)), "no earlier than the call + validity")
	assert.False(t, d.After(entered.Add(v)), "no later than the backend call's start + validity")
	assert.True(t, d.After(old))
	assert.Equal(t, []time.Duration{ttl}, f.ttlsSeen())
	assert.True(t, l.Held())
	assert.NoError(t, l.Err())
}

func TestRefreshGetsCurrentToken(t *testing.T) {
	// The backend refreshes the lock held with the lease's current token:
	// the acquire's, then the one a Reissue gave.
	f := &fake{reissueFn: func(_ context.Context, _ int, floor uint64) (uint64, error) { return floor + 5, nil }}
	cfg := config()
	cfg.TTL, cfg.KeepAlive = time.Minute, 15*time.Millisecond
	l := start(t, f, time.Now(), time.Minute, cfg)
	require.NoError(t, l.Refresh(t.Context(), time.Minute))
	got, err := l.Reissue(t.Context(), 0)
	require.NoError(t, err)
	require.Equal(t, tok0.Seq+5, got.Seq)
	n := len(f.toksSeen())
	require.NoError(t, l.Refresh(t.Context(), time.Minute))
	require.Eventually(t, func() bool { return len(f.toksSeen()) >= n+2 }, waitFor, tick, "and the keep-alive's")

	toks := f.toksSeen()
	assert.Equal(t, tok0, toks[0])
	for i, tk := range toks {
		assert.True(t, tk == tok0 || tk == got, "refresh %d got %v", i, tk)
	}
	for _, tk := range toks[n:] {
		assert.Equal(t, got, tk, "after the reissue: its token")
	}
}

func TestRefreshShorterTTLMovesDeadlineEarlier(t *testing.T) {
	l := start(t, &fake{}, time.Now(), time.Hour, config())
	require.NoError(t, l.Refresh(t.Context(), 40*time.Millisecond))
	assert.True(t, l.Deadline().Before(time.Now().Add(time.Minute)))
	// and the timer follows the new deadline
	require.Eventually(t, func() bool { return closed(l.Done()) }, waitFor, tick)
	assert.ErrorIs(t, l.Err(), errLost)
}

func TestRefreshLostEndsLease(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error {
		return fmt.Errorf("%w: held by another", errLost)
	}}
	l := start(t, f, time.Now(), time.Minute, cfg)

	err := l.Refresh(t.Context(), time.Minute)
	require.ErrorIs(t, err, errLost)
	assert.True(t, closed(l.Done()), "ended synchronously")
	assert.ErrorIs(t, l.Err(), errLost)
	assert.Contains(t, l.Err().Error(), "held by another", "Err is the backend's error")
	assert.False(t, l.Held())

	// An ended lease: Refresh returns Err without I/O.
	err = l.Refresh(t.Context(), time.Minute)
	assert.ErrorIs(t, err, errLost)
	assert.EqualValues(t, 1, f.refreshes.Load())

	require.Eventually(t, func() bool { _, lost, _ := r.snapshot(); return len(lost) == 1 }, waitFor, tick)
	refreshed, lost, _ := r.snapshot()
	require.Len(t, refreshed, 2)
	assert.False(t, refreshed[0].KeepAlive)
	assert.Equal(t, observe.KindLease, refreshed[0].Kind)
	assert.Equal(t, time.Minute, refreshed[0].TTL)
	assert.Equal(t, tok0, refreshed[0].Token)
	assert.ErrorIs(t, refreshed[0].Err, errLost)
	assert.ErrorIs(t, lost[0].Err, errLost)
	time.Sleep(20 * time.Millisecond)
	_, lost, _ = r.snapshot()
	assert.Len(t, lost, 1, "a loss is reported once")
}

func TestRefreshOtherErrorLeavesLease(t *testing.T) {
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error { return errBoom }}
	l := start(t, f, time.Now(), time.Minute, config())
	old := l.Deadline()

	err := l.Refresh(t.Context(), 2*time.Minute)
	require.ErrorIs(t, err, errBoom)
	assert.NotErrorIs(t, err, errLost)
	assert.NoError(t, l.Err())
	assert.True(t, l.Held())
	assert.Equal(t, old, l.Deadline(), "the deadline is unchanged")
	assert.False(t, closed(l.Done()))
}

func TestRefreshErrorJoinsEndedCtx(t *testing.T) {
	// The backend fails with an I/O error once ctx's deadline passed: the
	// caller must still learn that its context ended.
	f := &fake{refreshFn: func(ctx context.Context, _ int, _ time.Duration) error {
		<-ctx.Done()
		return errors.New("i/o timeout")
	}}
	l := start(t, f, time.Now(), time.Minute, config())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := l.Refresh(ctx, time.Minute)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, l.Err(), "an I/O error leaves the lease")
}

func TestRefreshTooSlowLeavesDeadline(t *testing.T) {
	// The refresh took longer than the validity of its ttl: no deadline is
	// left to move to.
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error {
		time.Sleep(20 * time.Millisecond)
		return nil
	}}
	cfg := config()
	cfg.DriftFactor = 0
	l := start(t, f, time.Now(), time.Minute, cfg)
	old := l.Deadline()
	err := l.Refresh(t.Context(), 5*time.Millisecond) // validity 3ms
	require.Error(t, err)
	assert.NotErrorIs(t, err, errLost)
	assert.Equal(t, old, l.Deadline())
	assert.NoError(t, l.Err())
}

func TestRefreshEndedWhileInFlight(t *testing.T) {
	// The backend extended the lock but the lease ended meanwhile (released,
	// or its timer fired): the deadline is not moved on an ended lease.
	var l *lifetime.Life
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error {
		l.End(errReleased)
		return nil
	}}
	l = start(t, f, time.Now(), time.Minute, config())
	old := l.Deadline()
	assert.ErrorIs(t, l.Refresh(t.Context(), time.Hour), errReleased)
	assert.Equal(t, old, l.Deadline())
}

func TestWaitingForOpTokenEndsWithCtx(t *testing.T) {
	// Refresh and Reissue wait for the op token only while their ctx lives.
	entered, unblock := make(chan struct{}), make(chan struct{})
	f := &fake{refreshFn: func(_ context.Context, n int, _ time.Duration) error {
		if n == 1 {
			close(entered)
			<-unblock // holds the op token
		}
		return nil
	}}
	l := start(t, f, time.Now(), time.Minute, config())
	refreshed := make(chan error, 1)
	go func() { refreshed <- l.Refresh(context.Background(), time.Minute) }()
	<-entered

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, l.Refresh(ctx, time.Minute), context.DeadlineExceeded)
	_, err := l.Reissue(ctx, 1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualValues(t, 1, f.refreshes.Load())
	assert.Zero(t, f.reissues.Load())
	assert.NoError(t, l.Err(), "a call that gave up waiting leaves the lease")

	close(unblock)
	require.NoError(t, <-refreshed)
	require.NoError(t, l.Refresh(t.Context(), time.Minute))
}

func TestRefreshOnEndedLeaseNoIO(t *testing.T) {
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, config())
	require.NoError(t, l.Release(t.Context()))
	err := l.Refresh(t.Context(), time.Minute)
	assert.ErrorIs(t, err, errReleased)
	assert.Zero(t, f.refreshes.Load())

	l2 := start(t, f, time.Now(), time.Minute, config())
	l2.End(fmt.Errorf("%w: gone", errLost))
	assert.ErrorIs(t, l2.Refresh(t.Context(), time.Minute), errLost)
	assert.Zero(t, f.refreshes.Load())
}

func TestRefreshInvalidArgs(t *testing.T) {
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, config())
	//nolint:staticcheck // a nil context on purpose
	assert.ErrorIs(t, l.Refresh(nil, time.Minute), errInvalid)
	for _, ttl := range []time.Duration{0, -time.Second, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond} {
		assert.ErrorIs(t, l.Refresh(t.Context(), ttl), errInvalid, "ttl %v", ttl)
	}
	assert.Zero(t, f.refreshes.Load())
	assert.NoError(t, l.Err(), "a refused argument leaves the lease")
}

func TestRefreshNilCtxWithHooks(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	l := start(t, &fake{}, time.Now(), time.Minute, cfg)
	//nolint:staticcheck // a nil context on purpose
	assert.ErrorIs(t, l.Refresh(nil, time.Minute), errInvalid)
	refreshed, _, _ := r.snapshot()
	assert.Empty(t, refreshed, "no event for a nil context (hooks get a ctx)")
}

func TestEndOnce(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	l := start(t, &fake{}, time.Now(), time.Minute, cfg)
	first := fmt.Errorf("%w: first", errLost)
	l.End(first)
	l.End(fmt.Errorf("%w: second", errLost))
	l.End(errReleased)
	assert.Equal(t, first, l.Err())
	require.Eventually(t, func() bool { _, lost, _ := r.snapshot(); return len(lost) == 1 }, waitFor, tick)
	time.Sleep(20 * time.Millisecond)
	_, lost, _ := r.snapshot()
	assert.Len(t, lost, 1)
}

// ---- Release ----

func TestReleaseEndsWithReleased(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	f := &fake{}
	at := time.Now().Add(-time.Second)
	l := start(t, f, at, time.Minute, cfg)

	require.NoError(t, l.Release(t.Context()))
	assert.ErrorIs(t, l.Err(), errReleased)
	assert.True(t, closed(l.Done()))
	assert.False(t, l.Held())
	assert.EqualValues(t, 1, f.releases.Load())

	// Again: nil, no I/O.
	require.NoError(t, l.Release(t.Context()))
	assert.EqualValues(t, 1, f.releases.Load())

	_, _, released := r.snapshot()
	require.Len(t, released, 1, "only the first Release is reported")
	assert.Equal(t, observe.KindLease, released[0].Kind)
	assert.Equal(t, tok0, released[0].Token)
	assert.NoError(t, released[0].Err)
	assert.GreaterOrEqual(t, released[0].Held, time.Second)
	time.Sleep(20 * time.Millisecond)
	_, lost, _ := r.snapshot()
	assert.Empty(t, lost, "a release is not a loss")
}

func TestReleaseTwiceAfterError(t *testing.T) {
	f := &fake{releaseFn: func(context.Context, int) error { return fmt.Errorf("%w: was not held", errLost) }}
	l := start(t, f, time.Now(), time.Minute, config())
	assert.ErrorIs(t, l.Release(t.Context()), errLost)
	assert.ErrorIs(t, l.Err(), errReleased, "the lease ends released, whatever the release found")
	assert.NoError(t, l.Release(t.Context()), "whatever the first found")
	assert.EqualValues(t, 1, f.releases.Load())
}

func TestReleaseOfLostLease(t *testing.T) {
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, config())
	l.End(fmt.Errorf("%w: gone", errLost))
	require.NoError(t, l.Release(t.Context()))
	assert.EqualValues(t, 1, f.releases.Load(), "a lost lease is still released once")
	assert.ErrorIs(t, l.Err(), errLost, "and keeps its Err")
}

func TestReleaseNilCtx(t *testing.T) {
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, config())
	//nolint:staticcheck // a nil context on purpose
	assert.ErrorIs(t, l.Release(nil), errInvalid)
	assert.Zero(t, f.releases.Load())
	assert.NoError(t, l.Err(), "a refused Release leaves the lease")
	require.NoError(t, l.Release(t.Context()), "and a later Release still releases")
	assert.EqualValues(t, 1, f.releases.Load())
}

func TestReleaseCtxEndsWhileOpHeld(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	var releaseCtxErr atomic.Value
	f := &fake{
		refreshFn: func(ctx context.Context, _ int, _ time.Duration) error {
			close(entered)
			<-unblock // holds the op token, whatever its ctx says
			return errors.New("refresh: i/o")
		},
		releaseFn: func(ctx context.Context, n int) error {
			releaseCtxErr.Store(fmt.Sprint(ctx.Err()))
			if n == 1 {
				return errBoom // the background release retries
			}
			return nil
		},
	}
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	l := start(t, f, time.Now(), time.Minute, cfg)

	refreshed := make(chan error, 1)
	go func() { refreshed <- l.Refresh(t.Context(), time.Minute) }()
	<-entered

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	err := l.Release(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, l.Err(), errReleased, "the lease ended before waiting for the op token")
	assert.Zero(t, f.releases.Load(), "the refresh still holds the op token")
	_, _, released := r.snapshot()
	require.Len(t, released, 1)
	assert.ErrorIs(t, released[0].Err, context.DeadlineExceeded)

	close(unblock)
	assert.ErrorIs(t, <-refreshed, errReleased, "a refresh that ended with the lease returns its Err")
	require.Eventually(t, func() bool { return f.releases.Load() == 2 }, waitFor, tick, "released in the background, retried")
	assert.Equal(t, "<nil>", releaseCtxErr.Load(), "under a context of its own")
	assert.False(t, f.overlap.Load())
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 2, f.releases.Load(), "no retry after a success")
	assert.NoError(t, l.Release(t.Context()))
	assert.EqualValues(t, 2, f.releases.Load())
}

func TestReleaseCancelsRefreshInFlight(t *testing.T) {
	entered := make(chan struct{})
	f := &fake{refreshFn: func(ctx context.Context, _ int, _ time.Duration) error {
		close(entered)
		<-ctx.Done() // a refresh stuck on a dead connection
		return ctx.Err()
	}}
	l := start(t, f, time.Now(), time.Minute, config())
	refreshed := make(chan error, 1)
	go func() { refreshed <- l.Refresh(context.Background(), time.Minute) }()
	<-entered
	require.NoError(t, l.Release(t.Context()), "the release cancelled the refresh and took the op token")
	assert.ErrorIs(t, <-refreshed, errReleased)
	assert.EqualValues(t, 1, f.releases.Load())
	assert.False(t, f.overlap.Load())
}

// ---- Reissue ----

func TestReissue(t *testing.T) {
	f := &fake{reissueFn: func(_ context.Context, _ int, floor uint64) (uint64, error) { return floor + 32, nil }}
	l := start(t, f, time.Now(), time.Minute, config())

	got, err := l.Reissue(t.Context(), 100)
	require.NoError(t, err)
	assert.EqualValues(t, 100, f.lastFloor())
	want := fence.Token{Key: tok0.Key, Seq: 132, Holder: tok0.Holder}
	assert.Equal(t, want, got)
	assert.Equal(t, want, l.Token(), "the new Seq becomes the token's")

	// A floor below the token is lifted to it.
	_, err = l.Reissue(t.Context(), 3)
	require.NoError(t, err)
	assert.EqualValues(t, 132, f.lastFloor())
	_, err = l.Reissue(t.Context(), 0)
	require.NoError(t, err)
	assert.EqualValues(t, 164, f.lastFloor())
	assert.EqualValues(t, 196, l.Token().Seq)

	// The largest floor accepted.
	_, err = l.Reissue(t.Context(), fence.MaxSeq-1)
	require.NoError(t, err)
	assert.Equal(t, fence.MaxSeq-1, f.lastFloor())
}

func TestReissueRefusals(t *testing.T) {
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, config())
	for _, floor := range []uint64{fence.MaxSeq, fence.MaxSeq + 1, ^uint64(0)} {
		got, err := l.Reissue(t.Context(), floor)
		assert.ErrorIs(t, err, errInvalid, "floor %d", floor)
		assert.Zero(t, got)
	}
	//nolint:staticcheck // a nil context on purpose
	_, err := l.Reissue(nil, 1)
	assert.ErrorIs(t, err, errInvalid)
	assert.Zero(t, f.reissues.Load())
	assert.Equal(t, tok0, l.Token())
	assert.NoError(t, l.Err())
}

func TestReissueLostEndsLease(t *testing.T) {
	f := &fake{reissueFn: func(context.Context, int, uint64) (uint64, error) {
		return 0, fmt.Errorf("%w: gone", errLost)
	}}
	l := start(t, f, time.Now(), time.Minute, config())
	got, err := l.Reissue(t.Context(), 50)
	require.ErrorIs(t, err, errLost)
	assert.Zero(t, got)
	assert.Equal(t, tok0, l.Token(), "the token is unchanged")
	assert.True(t, closed(l.Done()))
	assert.ErrorIs(t, l.Err(), errLost)

	_, err = l.Reissue(t.Context(), 50)
	assert.ErrorIs(t, err, errLost, "an ended lease returns its Err")
	assert.EqualValues(t, 1, f.reissues.Load(), "without I/O")
}

func TestReissueOtherErrorLeavesLease(t *testing.T) {
	f := &fake{reissueFn: func(context.Context, int, uint64) (uint64, error) { return 0, errBoom }}
	l := start(t, f, time.Now(), time.Minute, config())
	_, err := l.Reissue(t.Context(), 50)
	require.ErrorIs(t, err, errBoom)
	assert.Equal(t, tok0, l.Token())
	assert.NoError(t, l.Err())
}

func TestReissueEndedWhileInFlight(t *testing.T) {
	// The backend succeeded but the lease was released meanwhile: the token
	// is not changed on an ended lease.
	var l *lifetime.Life
	f := &fake{reissueFn: func(_ context.Context, _ int, floor uint64) (uint64, error) {
		l.End(errReleased)
		return floor + 1, nil
	}}
	l = start(t, f, time.Now(), time.Minute, config())
	got, err := l.Reissue(t.Context(), 50)
	assert.ErrorIs(t, err, errReleased)
	assert.Zero(t, got)
	assert.Equal(t, tok0, l.Token())
}

// ---- Keep-alive ----

func TestKeepAliveRefreshes(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	cfg.TTL, cfg.KeepAlive = time.Second, 20*time.Millisecond
	f := &fake{}
	l := start(t, f, time.Now(), time.Second, cfg)
	first := l.Deadline()

	require.Eventually(t, func() bool { return f.refreshes.Load() >= 3 }, waitFor, tick)
	assert.True(t, l.Deadline().After(first), "the keep-alive moved the deadline")
	assert.NoError(t, l.Err())
	for _, ttl := range f.ttlsSeen() {
		assert.Equal(t, time.Second, ttl)
	}
	refreshed, lost, _ := r.snapshot()
	require.NotEmpty(t, refreshed)
	for _, e := range refreshed {
		assert.True(t, e.KeepAlive)
		assert.Equal(t, observe.KindLease, e.Kind)
		assert.Equal(t, time.Second, e.TTL)
		assert.Equal(t, tok0, e.Token)
		assert.NoError(t, e.Err)
	}
	assert.Empty(t, lost)

	// Release stops it.
	require.NoError(t, l.Release(t.Context()))
	n := f.refreshes.Load()
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, n, f.refreshes.Load(), "no refresh after Release")
}

func TestKeepAliveLostEndsLease(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	cfg.TTL, cfg.KeepAlive = time.Second, 15*time.Millisecond
	f := &fake{refreshFn: func(_ context.Context, n int, _ time.Duration) error {
		switch n {
		case 1:
			return errBoom // retried at the next tick
		case 2:
			return nil
		default:
			return fmt.Errorf("%w: taken over", errLost)
		}
	}}
	l := start(t, f, time.Now(), time.Second, cfg)

	require.Eventually(t, func() bool { return closed(l.Done()) }, waitFor, tick)
	assert.ErrorIs(t, l.Err(), errLost)
	assert.Contains(t, l.Err().Error(), "taken over")
	assert.EqualValues(t, 3, f.refreshes.Load())
	time.Sleep(60 * time.Millisecond)
	assert.EqualValues(t, 3, f.refreshes.Load(), "the keep-alive stops with the lease")

	require.Eventually(t, func() bool { _, lost, _ := r.snapshot(); return len(lost) == 1 }, waitFor, tick)
	refreshed, lost, _ := r.snapshot()
	require.Len(t, refreshed, 3)
	assert.ErrorIs(t, refreshed[0].Err, errBoom)
	assert.NoError(t, refreshed[1].Err)
	assert.ErrorIs(t, refreshed[2].Err, errLost)
	for _, e := range refreshed {
		assert.True(t, e.KeepAlive)
	}
	assert.ErrorIs(t, lost[0].Err, errLost)
	assert.Equal(t, tok0, lost[0].Token)
}

func TestKeepAliveRefreshIsBounded(t *testing.T) {
	// A refresh stuck on a dead connection is cut off by the period (and the
	// deadline), so that the keep-alive tries again before the lease is
	// lost.
	var ctxDeadline atomic.Value
	cfg := config()
	cfg.TTL, cfg.KeepAlive = time.Minute, 20*time.Millisecond
	f := &fake{refreshFn: func(ctx context.Context, n int, _ time.Duration) error {
		if n == 1 {
			d, ok := ctx.Deadline()
			assert.True(t, ok, "the keep-alive's refresh has a deadline")
			ctxDeadline.Store(d)
			<-ctx.Done()
			return errors.New("i/o timeout")
		}
		return nil
	}}
	l := start(t, f, time.Now(), time.Minute, cfg)
	first := l.Deadline()
	require.Eventually(t, func() bool { return f.refreshes.Load() >= 2 }, waitFor, tick)
	assert.False(t, ctxDeadline.Load().(time.Time).After(first), "bounded by the lease's deadline")
	assert.NoError(t, l.Err())
}

func TestKeepAliveRefreshBoundedByDeadline(t *testing.T) {
	// The deadline is nearer than the next tick: the keep-alive's refresh
	// gets the deadline as its own.
	every := 100 * time.Millisecond
	cfg := config()
	cfg.DriftFactor = 0
	cfg.TTL, cfg.KeepAlive = time.Minute, every
	got := make(chan time.Time, 1)
	f := &fake{refreshFn: func(ctx context.Context, n int, _ time.Duration) error {
		if n == 1 {
			d, _ := ctx.Deadline()
			got <- d
		}
		return nil
	}}
	// The first tick comes at 100ms, 80ms before the deadline.
	l := start(t, f, time.Now(), 180*time.Millisecond+lifetime.DriftFloor, cfg)
	first := l.Deadline()
	select {
	case d := <-got:
		assert.True(t, d.Equal(first), "the refresh is bounded by the deadline, not the period")
	case <-l.Done():
		t.Skip("the machine was too slow: the lease expired before its first keep-alive tick")
	case <-time.After(waitFor):
		t.Fatal("no keep-alive refresh")
	}
}

func TestKeepAliveWithReleaseInFlight(t *testing.T) {
	// Release cancels a keep-alive refresh in flight, and does not wait for
	// the whole refresh.
	entered := make(chan struct{}, 1)
	cfg := config()
	cfg.TTL, cfg.KeepAlive = time.Minute, 10*time.Millisecond
	f := &fake{refreshFn: func(ctx context.Context, _ int, _ time.Duration) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	l := start(t, f, time.Now(), time.Minute, cfg)
	<-entered
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	require.NoError(t, l.Release(ctx))
	assert.EqualValues(t, 1, f.releases.Load())
	assert.False(t, f.overlap.Load())
}

// ---- Serialisation ----

func TestOpsAreSerialised(t *testing.T) {
	pause := func(ctx context.Context) error {
		select {
		case <-time.After(200 * time.Microsecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &fake{
		refreshFn: func(ctx context.Context, _ int, _ time.Duration) error { return pause(ctx) },
		releaseFn: func(ctx context.Context, _ int) error { return pause(ctx) },
		reissueFn: func(ctx context.Context, _ int, floor uint64) (uint64, error) {
			if err := pause(ctx); err != nil {
				return 0, err
			}
			return floor + 1, nil
		},
	}
	cfg := config()
	cfg.TTL, cfg.KeepAlive = time.Minute, 10*time.Millisecond // the keep-alive joins in
	l := start(t, f, time.Now(), time.Minute, cfg)

	var wg sync.WaitGroup
	var reissued atomic.Int64
	ctx := t.Context()
	for i := range 6 {
		wg.Go(func() {
			for j := range 40 {
				_ = l.Refresh(ctx, time.Minute)
				if _, err := l.Reissue(ctx, 0); err == nil {
					reissued.Add(1)
				}
				if i == 0 && j == 20 {
					_ = l.Release(ctx)
				}
			}
		})
	}
	wg.Wait()
	assert.False(t, f.overlap.Load(), "two backend calls ran at once")
	assert.EqualValues(t, 1, f.releases.Load())
	assert.Positive(t, f.refreshes.Load())
	assert.Positive(t, reissued.Load())
	assert.Equal(t, tok0.Seq+uint64(reissued.Load()), l.Token().Seq,
		"each reissue started from the token the previous one left")
	assert.ErrorIs(t, l.Err(), errReleased)
}

func TestConcurrentReleasesReleaseOnce(t *testing.T) {
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, config())
	var wg sync.WaitGroup
	var errs atomic.Int64
	for range 16 {
		wg.Go(func() {
			if l.Release(t.Context()) != nil {
				errs.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, f.releases.Load())
	assert.Zero(t, errs.Load())
}

func TestPanickingHookLeavesOpTokenFree(t *testing.T) {
	// emit does not contain a hook's panic (it promises nil-safety only),
	// and observe asks hooks not to panic. One that does must at least not
	// leave the op token taken: the panic unwinds through unlockOp.
	cfg := config()
	cfg.Hooks = &observe.Hooks{
		Refreshed: func(context.Context, observe.Refreshed) { panic("refreshed hook") },
		Released:  func(context.Context, observe.Released) { panic("released hook") },
	}
	f := &fake{}
	l := start(t, f, time.Now(), time.Minute, cfg)
	assert.PanicsWithValue(t, "refreshed hook", func() { _ = l.Refresh(t.Context(), time.Minute) })
	assert.EqualValues(t, 1, f.refreshes.Load())
	assert.True(t, l.Held())
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	_, err := l.Reissue(ctx, 1)
	require.NoError(t, err, "the op token is free")
	assert.PanicsWithValue(t, "released hook", func() { _ = l.Release(ctx) })
	assert.EqualValues(t, 1, f.releases.Load())
	_, err = l.Reissue(ctx, 1)
	assert.ErrorIs(t, err, errReleased, "not ctx's error: the op token is free")
}

// ---- Nil ----

func TestNil(t *testing.T) {
	l := lifetime.Nil(config())
	require.ErrorIs(t, l.Err(), errInvalid)
	assert.False(t, l.Held())
	assert.True(t, closed(l.Done()))
	assert.Error(t, l.Context().Err())
	assert.ErrorIs(t, context.Cause(l.Context()), errInvalid)
	assert.Zero(t, l.Token())
	assert.Zero(t, l.Deadline())

	ctx := t.Context()
	for range 2 {
		assert.ErrorIs(t, l.Refresh(ctx, time.Minute), errInvalid)
		assert.ErrorIs(t, l.Refresh(ctx, 0), errInvalid)
		assert.ErrorIs(t, l.Release(ctx), errInvalid)
		got, err := l.Reissue(ctx, 5)
		assert.ErrorIs(t, err, errInvalid)
		assert.Zero(t, got)
		_, err = l.Reissue(ctx, fence.MaxSeq)
		assert.ErrorIs(t, err, errInvalid)
		//nolint:staticcheck // nil contexts on purpose
		{
			assert.ErrorIs(t, l.Refresh(nil, time.Minute), errInvalid)
			assert.ErrorIs(t, l.Release(nil), errInvalid)
			_, err = l.Reissue(nil, 5)
			assert.ErrorIs(t, err, errInvalid)
		}
	}
	l.End(errLost) // changes nothing
	assert.ErrorIs(t, l.Err(), errInvalid)
}

func TestNilConcurrentAndHooks(t *testing.T) {
	var r rec
	cfg := config()
	cfg.Hooks = r.hooks()
	l := lifetime.Nil(cfg)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				_ = l.Refresh(t.Context(), time.Minute)
				_ = l.Release(t.Context())
				_, _ = l.Reissue(t.Context(), 1)
				_ = l.Held()
				_ = l.Token()
			}
		})
	}
	wg.Wait()
	time.Sleep(20 * time.Millisecond)
	_, lost, _ := r.snapshot()
	assert.Empty(t, lost, "a nil lease is never reported lost")
}
