package lifetime

// Tests that need the lifetime's insides: a timer that has not fired yet
// although the deadline passed (its goroutine is late on a loaded machine)
// is simulated by stopping it.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
)

var (
	errTestLost     = errors.New("internal test: lost")
	errTestReleased = errors.New("internal test: released")
	errTestInvalid  = errors.New("internal test: invalid")
)

type stub struct {
	refresh           func(context.Context) error
	refreshes, others atomic.Int64
}

func (s *stub) Refresh(ctx context.Context, _ fence.Token, _ time.Duration) error {
	s.refreshes.Add(1)
	if s.refresh != nil {
		return s.refresh(ctx)
	}
	return nil
}

func (s *stub) Release(context.Context) error { s.others.Add(1); return nil }

func (s *stub) Reissue(_ context.Context, floor uint64) (uint64, error) {
	s.others.Add(1)
	return floor + 1, nil
}

func testConfig() Config {
	return Config{Lost: errTestLost, Released: errTestReleased, Invalid: errTestInvalid}
}

// lateTimer starts a lifetime of ttl whose timer will not fire: armed,
// then stopped.
func lateTimer(t *testing.T, b Backend, ttl time.Duration) *Life {
	t.Helper()
	l := Start(b, fence.Token{Key: "k", Seq: 7, Holder: "h"}, time.Now(), ttl, testConfig())
	l.mu.Lock()
	l.armLocked()
	l.timer.Stop()
	l.mu.Unlock()
	t.Cleanup(func() { l.End(errTestReleased) })
	return l
}

func TestPassedDeadlineEndsBeforeIO(t *testing.T) {
	for name, call := range map[string]func(*Life) error{
		"refresh": func(l *Life) error { return l.Refresh(context.Background(), time.Minute) },
		"reissue": func(l *Life) error { _, err := l.Reissue(context.Background(), 1); return err },
	} {
		t.Run(name, func(t *testing.T) {
			s := &stub{}
			l := lateTimer(t, s, 20*time.Millisecond)
			require.Eventually(t, func() bool { return !l.Held() }, 5*time.Second, time.Millisecond)
			// The timer has not ended it: the call is the first to look.
			err := call(l)
			require.ErrorIs(t, err, errTestLost, "a lease that Held called lost stays lost")
			assert.Zero(t, s.refreshes.Load()+s.others.Load(), "no I/O")
			assert.ErrorIs(t, l.Err(), errTestLost)
			select {
			case <-l.Done():
			default:
				t.Fatal("Done is open")
			}
			assert.Equal(t, fence.Token{Key: "k", Seq: 7, Holder: "h"}, l.Token())
		})
	}
}

func TestExpireFollowsMovedDeadline(t *testing.T) {
	// The timer set for the first deadline fires after a refresh moved it:
	// expire re-arms instead of ending the lease.
	l := Start(&stub{}, fence.Token{Key: "k", Seq: 1, Holder: "h"}, time.Now(), 30*time.Millisecond, testConfig())
	t.Cleanup(func() { l.End(errTestReleased) })
	l.mu.Lock()
	l.armLocked()
	moved := time.Now().Add(time.Second) // as a refresh does, without touching the timer
	l.deadline = moved
	l.mu.Unlock()
	time.Sleep(100 * time.Millisecond) // the first timer has fired
	if time.Now().Before(moved) {
		assert.NoError(t, l.Err(), "the first timer did not end the lease")
		assert.True(t, l.Held())
	}
	require.Eventually(t, func() bool { return l.Err() != nil }, 5*time.Second, time.Millisecond,
		"the re-armed timer ends the lease at the moved deadline")
	assert.False(t, time.Now().Before(moved), "not before it")
	assert.ErrorIs(t, l.Err(), errTestLost)
}

// A refresh in flight when the deadline passes and before the timer's
// goroutine ran: Held has said false, yet the refresh succeeds and Held
// says true again. live() promises that a lease that Held called lost stays
// lost; the success path of refresh checks only Err, not the deadline it
// replaces.
func TestBugRefreshRevivesPassedDeadline(t *testing.T) {
	var l *Life
	var sawLost atomic.Bool
	s := &stub{refresh: func(context.Context) error {
		for l.Held() {
			time.Sleep(time.Millisecond)
		}
		sawLost.Store(true)
		return nil // the server still had the key
	}}
	l = lateTimer(t, s, 20*time.Millisecond)
	err := l.Refresh(context.Background(), time.Minute)
	require.True(t, sawLost.Load())
	assert.ErrorIs(t, err, errTestLost)
	assert.False(t, l.Held(), "Held said false during the refresh")
}
