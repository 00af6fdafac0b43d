package lifetime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/lifetime"
)

// startClaim starts a claimed lifetime of claim, confirmed to a minute,
// that the test ends at cleanup.
func startClaim(t *testing.T, b lifetime.Backend, at time.Time, claim time.Duration) *lifetime.Life {
	t.Helper()
	cfg := config()
	cfg.TTL = time.Minute
	l := lifetime.StartClaim(b, tok0, at, claim, cfg)
	t.Cleanup(func() { l.End(errReleased) })
	return l
}

// TestStartClaimConfirms: the deadline counts the claim from the start;
// once half of its validity is left, one refresh to the whole ttl, with
// the lease's current token, moves the deadline as Refresh does.
func TestStartClaimConfirms(t *testing.T) {
	const claim = 300 * time.Millisecond
	var calledAt atomic.Int64
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error {
		calledAt.Store(time.Now().UnixNano())
		return nil
	}}
	at := time.Now()
	l := startClaim(t, f, at, claim)
	v := lifetime.Validity(claim, factor)
	assert.Equal(t, at.Add(v), l.Deadline(), "the claim's validity from the start")
	tok, err := l.Reissue(t.Context(), 50) // the confirm refreshes the current token
	require.NoError(t, err)

	require.Eventually(t, func() bool { return f.refreshes.Load() == 1 }, waitFor, tick, "the claim was confirmed")
	assert.False(t, time.Unix(0, calledAt.Load()).Before(at.Add(v/2)), "not before half the claim's validity ran")
	require.Eventually(t, func() bool { return l.Deadline().After(at.Add(30 * time.Second)) }, waitFor, tick,
		"the deadline moved to the whole ttl")
	assert.Equal(t, []time.Duration{time.Minute}, f.ttlsSeen())
	assert.Equal(t, tok, f.toksSeen()[0])
	assert.True(t, l.Held())
	time.Sleep(claim) // past the claim: no second confirm
	assert.EqualValues(t, 1, f.refreshes.Load())
}

// TestStartClaimReleasedFirst: a lease released before half its claim ran
// never sends the confirm (the hot key's handoffs cost nothing more).
func TestStartClaimReleasedFirst(t *testing.T) {
	const claim = 100 * time.Millisecond
	f := &fake{}
	l := startClaim(t, f, time.Now(), claim)
	require.NoError(t, l.Release(t.Context()))
	time.Sleep(2 * claim)
	assert.Zero(t, f.refreshes.Load(), "a confirm after the release")
	assert.EqualValues(t, 1, f.releases.Load())
}

// TestStartClaimRefreshedFirst: a refresh by the caller confirms the claim
// too; no background refresh follows, whatever ttl the caller chose.
func TestStartClaimRefreshedFirst(t *testing.T) {
	const claim = 200 * time.Millisecond
	f := &fake{}
	l := startClaim(t, f, time.Now(), claim)
	require.NoError(t, l.Refresh(t.Context(), 150*time.Millisecond))
	time.Sleep(claim / 2)
	assert.EqualValues(t, 1, f.refreshes.Load(), "the caller's refresh only")
	assert.Equal(t, []time.Duration{150 * time.Millisecond}, f.ttlsSeen())
}

// TestStartClaimLost: a confirm that finds the lock gone ends the lease.
func TestStartClaimLost(t *testing.T) {
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error { return errLost }}
	l := startClaim(t, f, time.Now(), 100*time.Millisecond)
	require.Eventually(t, func() bool { return closed(l.Done()) }, waitFor, tick)
	assert.ErrorIs(t, l.Err(), errLost)
	assert.EqualValues(t, 1, f.refreshes.Load(), "a lost lock is not asked again")
}

// TestStartClaimRetriesIOError: an I/O error is tried again while the
// claim lasts, and the next success moves the deadline.
func TestStartClaimRetriesIOError(t *testing.T) {
	const claim = 400 * time.Millisecond
	f := &fake{refreshFn: func(_ context.Context, n int, _ time.Duration) error {
		if n == 1 {
			return errBoom
		}
		return nil
	}}
	at := time.Now()
	l := startClaim(t, f, at, claim)
	require.Eventually(t, func() bool { return l.Deadline().After(at.Add(30 * time.Second)) }, waitFor, tick,
		"confirmed by the second refresh")
	assert.EqualValues(t, 2, f.refreshes.Load())
	assert.NoError(t, l.Err())
}

// TestStartClaimIOErrorsUntilLost: a confirm that never gets through
// leaves the lease to end at the claim's deadline, lost.
func TestStartClaimIOErrorsUntilLost(t *testing.T) {
	const claim = 100 * time.Millisecond
	f := &fake{refreshFn: func(context.Context, int, time.Duration) error { return errBoom }}
	at := time.Now()
	l := startClaim(t, f, at, claim)
	require.Eventually(t, func() bool { return closed(l.Done()) }, waitFor, tick)
	assert.ErrorIs(t, l.Err(), errLost)
	assert.False(t, time.Now().Before(at.Add(lifetime.Validity(claim, factor))), "not before the claim's deadline")
	n := f.refreshes.Load()
	assert.GreaterOrEqual(t, n, int64(1))
	time.Sleep(claim)
	assert.Equal(t, n, f.refreshes.Load(), "no refresh after the lease ended")
}
