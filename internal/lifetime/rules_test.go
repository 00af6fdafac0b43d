package lifetime_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/lifetime"
)

func TestDriftAndValidity(t *testing.T) {
	assert.Equal(t, 12*time.Millisecond, lifetime.Drift(time.Second, 0.01))
	assert.Equal(t, 988*time.Millisecond, lifetime.Validity(time.Second, 0.01))
	assert.Equal(t, lifetime.DriftFloor, lifetime.Drift(time.Second, 0))
	assert.Equal(t, 30*time.Second-3*time.Second-lifetime.DriftFloor, lifetime.Validity(30*time.Second, 0.1))
}

func TestCheckTTL(t *testing.T) {
	for _, c := range []struct {
		ttl    time.Duration
		factor float64
		ok     bool
	}{
		{0, 0, false},
		{-time.Second, 0, false},
		{999 * time.Microsecond, 0, false},
		{time.Millisecond, 0, false},     // above the floor, but the drift floor (2ms) eats it
		{2 * time.Millisecond, 0, false}, // validity 0
		{3 * time.Millisecond, 0, true},
		{10 * time.Millisecond, 0.49, true}, // 10 − 4.9 − 2 > 0
		{3 * time.Millisecond, 0.49, false}, // 3 − 1.47 − 2 < 0
		{time.Second, 0.01, true},
		{24 * time.Hour, 0.01, true},
	} {
		err := lifetime.CheckTTL(c.ttl, c.factor)
		if c.ok {
			assert.NoError(t, err, "ttl %v factor %v", c.ttl, c.factor)
		} else {
			assert.Error(t, err, "ttl %v factor %v", c.ttl, c.factor)
		}
	}
}

func TestCheckDriftFactor(t *testing.T) {
	for _, f := range []float64{0, 0.01, 0.25, 0.4999} {
		assert.NoError(t, lifetime.CheckDriftFactor(f), "%v", f)
	}
	for _, f := range []float64{0.5, 0.7, 1, -0.01, -1e-300, math.NaN(), math.Inf(1), math.Inf(-1)} {
		assert.Error(t, lifetime.CheckDriftFactor(f), "%v", f)
	}
}

func TestKeepAliveEvery(t *testing.T) {
	for _, c := range []struct {
		ttl, every time.Duration
		factor     float64
		want       time.Duration // 0: refused
	}{
		{30 * time.Second, 0, 0.01, 10 * time.Second}, // default ttl/3
		{15 * time.Millisecond, 0, 0, lifetime.MinKeepAlive},
		{12 * time.Millisecond, 0, 0, 0}, // the floor 10ms ≥ validity 10ms
		{time.Second, 5 * time.Millisecond, 0.01, 0},
		{time.Second, -time.Second, 0.01, 0},
		{time.Second, lifetime.MinKeepAlive, 0.01, lifetime.MinKeepAlive},
		{time.Second, 987 * time.Millisecond, 0.01, 987 * time.Millisecond},
		{time.Second, 988 * time.Millisecond, 0.01, 0}, // = validity
		{time.Second, time.Minute, 0.01, 0},
	} {
		got, err := lifetime.KeepAliveEvery(c.ttl, c.every, c.factor)
		if c.want == 0 {
			assert.Error(t, err, "ttl %v every %v", c.ttl, c.every)
			assert.Zero(t, got)
		} else {
			assert.NoError(t, err, "ttl %v every %v", c.ttl, c.every)
			assert.Equal(t, c.want, got, "ttl %v every %v", c.ttl, c.every)
		}
	}
}

// lateCtx has a deadline that has passed but has not noticed it yet, as a
// context does for a moment when a socket deadline set from it fires first.
type lateCtx struct {
	context.Context
	d time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.d, true }

func TestEnded(t *testing.T) {
	assert.NoError(t, lifetime.Ended(context.Background()))
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, lifetime.Ended(cctx), context.Canceled)

	late := lateCtx{context.Background(), time.Now().Add(-time.Millisecond)}
	require.NoError(t, late.Err())
	assert.ErrorIs(t, lifetime.Ended(late), context.DeadlineExceeded, "the deadline passed before ctx noticed")

	ahead := lateCtx{context.Background(), time.Now().Add(time.Hour)}
	assert.NoError(t, lifetime.Ended(ahead))

	dctx, cancel2 := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel2()
	<-dctx.Done()
	assert.ErrorIs(t, lifetime.Ended(dctx), context.DeadlineExceeded)
}

func TestWithCtx(t *testing.T) {
	live := context.Background()
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	late := lateCtx{context.Background(), time.Now().Add(-time.Millisecond)}
	io := errors.New("i/o timeout")

	assert.NoError(t, lifetime.WithCtx(cctx, nil), "no error stays no error")
	assert.Same(t, io, lifetime.WithCtx(live, io), "a live ctx leaves err")

	err := lifetime.WithCtx(cctx, io)
	assert.ErrorIs(t, err, io)
	assert.ErrorIs(t, err, context.Canceled)

	err = lifetime.WithCtx(late, io)
	assert.ErrorIs(t, err, io)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// Already said: unchanged.
	said := errors.Join(io, context.Canceled)
	assert.Equal(t, said, lifetime.WithCtx(cctx, said))
	assert.Equal(t, context.Canceled, lifetime.WithCtx(cctx, context.Canceled))
}

func TestCleanupBound(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		0:                      lifetime.CleanupMin,
		-time.Second:           lifetime.CleanupMin,
		500 * time.Millisecond: lifetime.CleanupMin,
		time.Second:            time.Second,
		5 * time.Second:        5 * time.Second,
		30 * time.Second:       30 * time.Second,
		31 * time.Second:       lifetime.CleanupMax,
		time.Hour:              lifetime.CleanupMax,
	} {
		assert.Equal(t, want, lifetime.CleanupBound(ttl), "ttl %v", ttl)
	}
	assert.Equal(t, time.Second, lifetime.CleanupMin)
	assert.Equal(t, 30*time.Second, lifetime.CleanupMax)
}
