package once_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
	"github.com/fencelock/fencelock/once"
	"github.com/fencelock/fencelock/verifier"
)

func TestDoneUntilThePeriodLessTheTolerance(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t, once.WithTolerance(200*time.Millisecond))
	n := name(t)
	const period = time.Second
	runs := 0
	job := func(context.Context) error { runs++; return nil }

	l, err := locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, tr.Do(ctx, l, period, job))
	require.NoError(t, l.Release(ctx))
	first := time.Now()

	// Another holder, right after: done, until 800ms after the first claim.
	l, err = locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	err = tr.Do(ctx, l, period, job)
	require.ErrorIs(t, err, once.ErrDone)
	var done *once.DoneError
	require.ErrorAs(t, err, &done)
	assert.Equal(t, n, done.Name)
	left := done.Until.Sub(done.Now)
	assert.True(t, left > 0 && left <= 800*time.Millisecond, "done for %v more", left)
	require.NoError(t, l.Release(ctx))
	assert.Equal(t, 1, runs)

	// After the window (by the server's clock), the next run goes ahead.
	time.Sleep(time.Until(first.Add(850 * time.Millisecond)))
	l, err = locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, tr.Do(ctx, l, period, job))
	require.NoError(t, l.Release(ctx))
	assert.Equal(t, 2, runs)
}

func TestFailedRunIsNotRecorded(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t)
	n := name(t)
	boom := errors.New("boom")
	for i, want := range []error{boom, nil, once.ErrDone} {
		l, err := locks.Acquire(ctx, n, 10*time.Second)
		require.NoError(t, err)
		err = tr.Do(ctx, l, time.Hour, func(context.Context) error {
			if i == 0 {
				return boom
			}
			return nil
		})
		if want == nil {
			assert.NoError(t, err, "run %d", i)
		} else {
			assert.ErrorIs(t, err, want, "run %d", i)
		}
		require.NoError(t, l.Release(ctx))
	}
}

// TestSupersededHolderCannotComplete: the token check is in the script.
// Holder 1 claims; its lease expires; holder 2 takes the lock and claims;
// holder 1's Complete, which no local check stops here, is refused, and
// the period stays open for holder 2.
func TestSupersededHolderCannotComplete(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t)
	n := name(t)
	l1, err := locks.Acquire(ctx, n, 100*time.Millisecond)
	require.NoError(t, err)
	c1, err := tr.Claim(ctx, l1.Token(), time.Hour)
	require.NoError(t, err)
	<-l1.Done()

	l2, err := locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	defer l2.Release(ctx)
	c2, err := tr.Claim(ctx, l2.Token(), time.Hour)
	require.NoError(t, err)

	err = c1.Complete(ctx)
	require.ErrorIs(t, err, verifier.ErrStale)
	var stale *verifier.StaleError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, l2.Token().Seq, stale.Highest)

	// Not done: a claim by holder 2's token again succeeds (a repeat).
	_, err = tr.Claim(ctx, l2.Token(), time.Hour)
	require.NoError(t, err)
	require.NoError(t, c2.Complete(ctx))
	require.NoError(t, c2.Complete(ctx), "completing again is harmless")
	_, err = tr.Claim(ctx, l2.Token(), time.Hour)
	require.ErrorIs(t, err, once.ErrDone)
	_, err = tr.Claim(ctx, l1.Token(), time.Hour)
	require.ErrorIs(t, err, verifier.ErrStale, "an older token cannot even claim")
}

// TestExpiredHolderWithNoSuccessorCompletes: no newer claim came, so the
// run that expired still records its completion: no other run started,
// and the next holder does not run the job again.
func TestExpiredHolderWithNoSuccessorCompletes(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t)
	n := name(t)
	l1, err := locks.Acquire(ctx, n, 100*time.Millisecond)
	require.NoError(t, err)
	c1, err := tr.Claim(ctx, l1.Token(), time.Hour)
	require.NoError(t, err)
	<-l1.Done()
	l2, err := locks.Acquire(ctx, n, 10*time.Second) // acquired, not yet claimed
	require.NoError(t, err)
	defer l2.Release(ctx)
	require.NoError(t, c1.Complete(ctx))
	_, err = tr.Claim(ctx, l2.Token(), time.Hour)
	require.ErrorIs(t, err, once.ErrDone)
}

func TestDoStopsTheJobWhenTheLeaseIsLost(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t)
	n := name(t)
	l, err := locks.Acquire(ctx, n, 200*time.Millisecond) // no keep-alive
	require.NoError(t, err)
	err = tr.Do(ctx, l, time.Hour, func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	require.ErrorIs(t, err, lease.ErrLost)
	l, err = locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	defer l.Release(ctx)
	_, err = tr.Claim(ctx, l.Token(), time.Hour)
	assert.NoError(t, err, "the lost run was not recorded")
}

func TestCompleteWithoutClaimState(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t)
	n := name(t)
	l, err := locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	defer l.Release(ctx)
	c, err := tr.Claim(ctx, l.Token(), time.Hour)
	require.NoError(t, err)
	require.NoError(t, shared.Del(ctx, once.StatePrefix+"{"+n+"}").Err())
	assert.ErrorIs(t, c.Complete(ctx), once.ErrNotClaimed)
}

func TestStateKeyExpires(t *testing.T) {
	ctx := t.Context()
	locks, tr := newLocks(t), newTracker(t)
	n := name(t)
	l, err := locks.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err)
	defer l.Release(ctx)
	require.NoError(t, tr.Do(ctx, l, time.Minute, func(context.Context) error { return nil }))
	ttl, err := shared.PTTL(ctx, once.StatePrefix+"{"+n+"}").Result()
	require.NoError(t, err)
	assert.InDelta(t, (2*time.Minute + time.Hour).Seconds(), ttl.Seconds(), 5)
	until, err := shared.HGet(ctx, once.StatePrefix+"{"+n+"}", "done_until").Int64()
	require.NoError(t, err)
	assert.Greater(t, until, time.Now().Add(50*time.Second).UnixMicro(), "done_until is whole microseconds")
}

func TestInvalid(t *testing.T) {
	ctx := t.Context()
	_, err := once.New(nil)
	assert.ErrorIs(t, err, once.ErrInvalid)
	var nilClient *redis.Client
	_, err = once.New(nilClient)
	assert.ErrorIs(t, err, once.ErrInvalid)
	_, err = once.New(shared, nil)
	assert.ErrorIs(t, err, once.ErrInvalid)
	_, err = once.New(shared, once.WithTolerance(-time.Second))
	assert.ErrorIs(t, err, once.ErrInvalid)
	assert.ErrorIs(t, err, lease.ErrInvalid)

	tr := newTracker(t, once.WithTolerance(time.Minute))
	tok := fence.Token{Key: "job", Seq: 1, Holder: "h"}
	_, err = tr.Claim(ctx, tok, time.Minute)
	assert.ErrorIs(t, err, once.ErrInvalid, "tolerance not below the period")
	_, err = tr.Claim(ctx, tok, 0)
	assert.ErrorIs(t, err, once.ErrInvalid)
	_, err = tr.Claim(nil, tok, time.Hour) //nolint:staticcheck // the nil context is the test
	assert.ErrorIs(t, err, once.ErrInvalid)
	_, err = tr.Claim(ctx, fence.Token{Key: "a{b}", Seq: 1, Holder: "h"}, time.Hour)
	assert.ErrorIs(t, err, once.ErrInvalid)
	_, err = tr.Claim(ctx, fence.Token{Key: "job"}, time.Hour)
	assert.ErrorIs(t, err, fence.ErrMalformed)
	var nilTracker *once.Tracker
	_, err = nilTracker.Claim(ctx, tok, time.Hour)
	assert.ErrorIs(t, err, once.ErrInvalid)
	var nilClaim *once.Claim
	assert.ErrorIs(t, nilClaim.Complete(ctx), once.ErrInvalid)
	assert.ErrorIs(t, tr.Do(ctx, nil, time.Hour, func(context.Context) error { return nil }), once.ErrInvalid)
	l, err := newLocks(t).Acquire(ctx, name(t), time.Second)
	require.NoError(t, err)
	defer l.Release(ctx)
	assert.ErrorIs(t, tr.Do(ctx, l, time.Hour, nil), once.ErrInvalid)
	_, err = tr.Claim(ctx, tok, once.MaxPeriod+time.Millisecond)
	assert.ErrorIs(t, err, once.ErrInvalid, "a period whose state key's ttl would overflow")
}

// TestInvalidToken: a token without a Seq (Seq 0, as a lease without a
// counter has) or with a bad holder is refused before any I/O with
// ErrInvalid (and lease.ErrInvalid), as the docs say; so is Do with a
// Redlock lease made without quorum fencing. Before, the claim went to
// Redis and came back as redisverifier's error.
func TestInvalidToken(t *testing.T) {
	ctx := t.Context()
	tr := newTracker(t)
	for _, tok := range []fence.Token{
		{Key: "job", Seq: 0, Holder: "h"},
		{Key: "job", Seq: fence.MaxSeq + 1, Holder: "h"},
		{Key: "job", Seq: 1, Holder: ""},
	} {
		_, err := tr.Claim(ctx, tok, time.Hour)
		assert.ErrorIs(t, err, once.ErrInvalid, "%+v", tok)
		assert.ErrorIs(t, err, lease.ErrInvalid, "%+v", tok)
	}

	nodes := testenv.NewRedisN(t, 3)
	var rdbs []*redis.Client
	for _, n := range nodes {
		o := n.Options()
		o.ContextTimeoutEnabled, o.MaxRetries = true, -1
		rdb := redis.NewClient(o)
		t.Cleanup(func() { rdb.Close() })
		rdbs = append(rdbs, rdb)
	}
	c, err := redlock.New(rdbs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	l, err := c.Acquire(ctx, name(t), 5*time.Second)
	require.NoError(t, err)
	defer l.Release(ctx)
	ran := false
	err = tr.Do(ctx, l, time.Hour, func(context.Context) error { ran = true; return nil })
	assert.ErrorIs(t, err, once.ErrInvalid)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	assert.False(t, ran, "the job must not run without a claim")
}
