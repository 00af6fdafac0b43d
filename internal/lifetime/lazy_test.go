package lifetime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/observe"
)

// timerOf is l's deadline timer, nil until something waited for the end.
func timerOf(l *Life) *time.Timer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.timer
}

// hasCtx reports whether l made its context.
func hasCtx(l *Life) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx != nil
}

// TestUnwatchedLeaseStartsNoTimer: a lease that nothing waits on (no
// Done, Context, keep-alive, claim or Lost hook) starts no timer and makes
// no context, and still ends, lost, the moment its deadline has passed for whoever asks:
// Err, Done, a Release (End). Waiting on Done arms the timer, which then
// closes it at the deadline; a Lost hook arms it at once, so the loss is
// reported when it happens.
func TestUnwatchedLeaseStartsNoTimer(t *testing.T) {
	tok := fence.Token{Key: "k", Seq: 3, Holder: "h"}
	start := func(ttl time.Duration, cfg Config) *Life {
		l := Start(&stub{}, tok, time.Now(), ttl, cfg)
		t.Cleanup(func() { l.End(errTestReleased) })
		return l
	}

	released := start(time.Minute, testConfig())
	released.End(errTestReleased)
	assert.Nil(t, timerOf(released), "acquired and released: no timer")
	assert.False(t, hasCtx(released), "nor a context")
	assert.ErrorIs(t, released.Err(), errTestReleased)
	ctx := released.Context()
	assert.ErrorIs(t, context.Cause(ctx), errTestReleased, "a context asked for after the end is cancelled with its cause")

	asked := start(20*time.Millisecond, testConfig())
	require.NoError(t, asked.Err())
	require.Eventually(t, func() bool { return !asked.Held() }, 5*time.Second, time.Millisecond)
	assert.Nil(t, timerOf(asked), "nothing waited on it")
	assert.ErrorIs(t, asked.Err(), errTestLost, "Err reads the passed deadline")
	select {
	case <-asked.Done():
	default:
		t.Fatal("Done is open after the deadline")
	}

	late := start(20*time.Millisecond, testConfig())
	require.Eventually(t, func() bool { return !late.Held() }, 5*time.Second, time.Millisecond)
	late.End(errTestReleased)
	assert.ErrorIs(t, late.Err(), errTestLost, "a release after the deadline finds the lease lost, as the timer would have")

	waited := start(30*time.Millisecond, testConfig())
	done := waited.Done()
	require.NotNil(t, timerOf(waited), "Done armed the timer")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	assert.ErrorIs(t, waited.Err(), errTestLost)

	lost := make(chan observe.Lost, 1)
	cfg := testConfig()
	cfg.Hooks = &observe.Hooks{Lost: func(e observe.Lost) { lost <- e }}
	hooked := start(30*time.Millisecond, cfg)
	require.NotNil(t, timerOf(hooked), "a Lost hook arms the timer at once")
	select {
	case e := <-lost:
		assert.ErrorIs(t, e.Err, errTestLost)
		assert.Equal(t, tok, e.Token)
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not reported")
	}
}

// TestLateTimerDeadlineCounts: a lease whose timer is armed (Done was asked
// for) but fires late, as under a GC pause or busy cores, is lost once its
// deadline has passed: Err says so, and a release then finds it lost, as
// for a lease nobody watched.
func TestLateTimerDeadlineCounts(t *testing.T) {
	tok := fence.Token{Key: "k", Seq: 3, Holder: "h"}
	l := Start(&stub{}, tok, time.Now(), 20*time.Millisecond, testConfig())
	t.Cleanup(func() { l.End(errTestReleased) })
	_ = l.Done()
	tm := timerOf(l)
	require.NotNil(t, tm, "Done armed the timer")
	tm.Stop() // the timer is late: it has not fired yet
	require.Eventually(t, func() bool { return !l.Held() }, 5*time.Second, time.Millisecond)
	assert.ErrorIs(t, l.Err(), errTestLost, "Err reads the passed deadline, whatever the timer")
	l.End(errTestReleased)
	assert.ErrorIs(t, l.Err(), errTestLost, "a release after the deadline finds the lease lost")
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Err said lost")
	}
}
