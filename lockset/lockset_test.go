package lockset_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/leasectx"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lockset"
)

func TestAcquireCanonicalOrderAndTokens(t *testing.T) {
	ctx := t.Context()
	locks := newLocks(t)
	ns := names(t, "a", "b")
	a, b := ns[0], ns[1]
	set, err := lockset.Acquire(ctx, locks, []string{b, a, b}, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{a, b}, set.Names())
	ls := set.Leases()
	require.Len(t, ls, 2)
	assert.Equal(t, a, ls[0].Name())
	toks := set.Tokens()
	require.Len(t, toks, 2)
	assert.Equal(t, ls[1].Token(), toks[b])
	tok, ok := set.Token(a)
	assert.True(t, ok)
	assert.Equal(t, ls[0].Token(), tok)
	_, ok = set.Token("other")
	assert.False(t, ok)
	assert.True(t, set.Held())
	assert.NoError(t, set.Err())
	assert.ElementsMatch(t, []string{a, b}, held(t, shared, a, b))

	require.NoError(t, set.Release(ctx))
	assert.Empty(t, held(t, shared, a, b))
	assert.ErrorIs(t, set.Err(), lease.ErrReleased)
	assert.False(t, set.Held())
	select {
	case <-set.Done():
	default:
		t.Fatal("Done is open after Release")
	}
	assert.NoError(t, set.Release(ctx), "releasing again")
}

// TestTryAcquireAllOrNothing: the second lock is held by another holder:
// the first, taken, is released before TryAcquire returns, the third is
// never taken.
func TestTryAcquireAllOrNothing(t *testing.T) {
	ctx := t.Context()
	locks, other := newLocks(t), newLocks(t)
	ns := names(t, "a", "b", "c")
	a, b, c := ns[0], ns[1], ns[2]
	lb, err := other.Acquire(ctx, b, 10*time.Second)
	require.NoError(t, err)
	defer lb.Release(ctx)

	_, err = lockset.TryAcquire(ctx, locks, []string{c, b, a}, 10*time.Second)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	var heldErr *lease.HeldError
	assert.ErrorAs(t, err, &heldErr)
	assert.Contains(t, err.Error(), b)
	assert.Equal(t, []string{b}, held(t, shared, a, b, c), "only the other holder's lock is held")
}

// TestAcquireTimeoutReleasesWhatItTook: the caller's context ends while
// the second lock is awaited: the first is released (in the background,
// the context having ended), and the error keeps ctx.Err().
func TestAcquireTimeoutReleasesWhatItTook(t *testing.T) {
	locks, other := newLocks(t), newLocks(t)
	ns := names(t, "a", "b")
	a, b := ns[0], ns[1]
	lb, err := other.Acquire(t.Context(), b, 10*time.Second)
	require.NoError(t, err)
	defer lb.Release(t.Context())

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = lockset.Acquire(ctx, locks, []string{a, b}, 10*time.Second)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Eventually(t, func() bool { return len(held(t, shared, a)) == 0 }, 2*time.Second, 10*time.Millisecond,
		"the first lock is released, well before its 10s ttl")
}

// TestLostWhileWaitingForTheNext: the first lock's lease (no keep-alive)
// expires while the second is awaited: Acquire gives up at once, not when
// its context ends, and says which lock was lost.
func TestLostWhileWaitingForTheNext(t *testing.T) {
	locks, other := newLocks(t), newLocks(t)
	ns := names(t, "a", "b")
	a, b := ns[0], ns[1]
	lb, err := other.Acquire(t.Context(), b, 10*time.Second)
	require.NoError(t, err)
	defer lb.Release(t.Context())

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = lockset.Acquire(ctx, locks, []string{a, b}, 300*time.Millisecond)
	require.ErrorIs(t, err, lease.ErrLost)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.NoError(t, ctx.Err(), "gave up before its context ended")
	assert.Less(t, time.Since(start), 4*time.Second)
	assert.Equal(t, fmt.Sprintf("lockset: %q expired while waiting for %q: give a ttl that outlasts the wait, or a keep-alive", a, b), err.Error())
	assert.NotErrorIs(t, err, context.Canceled, "the caller's context was not cancelled")
}

// TestGoneWhileWaitingForTheNext: the first lock disappears from Redis
// while the second is awaited; its keep-alive finds it gone, and Acquire
// gives up in one sentence that names both and says why.
func TestGoneWhileWaitingForTheNext(t *testing.T) {
	locks, other := newLocks(t), newLocks(t)
	ns := names(t, "a", "b")
	a, b := ns[0], ns[1]
	lb, err := other.Acquire(t.Context(), b, 10*time.Second)
	require.NoError(t, err)
	defer lb.Release(t.Context())

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	go func() { // once a is taken, while b is awaited
		for len(held(t, shared, a)) == 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		shared.Del(ctx, lockKey(a))
	}()
	_, err = lockset.Acquire(ctx, locks, []string{a, b}, 3*time.Second, lease.WithKeepAlive(50*time.Millisecond))
	require.ErrorIs(t, err, lease.ErrLost)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.NotErrorIs(t, err, context.Canceled)
	assert.NoError(t, ctx.Err(), "gave up before its context ended")
	prefix := fmt.Sprintf("lockset: %q was lost while waiting for %q (lease: lost: ", a, b)
	assert.True(t, strings.HasPrefix(err.Error(), prefix), "%q\nhas not the prefix %q", err, prefix)
	assert.Equal(t, 1, strings.Count(err.Error(), "lockset:"), "one sentence: %q", err)
}

// TestContextCarriesTheDeadline: the set's context tells a verifier the
// earliest local deadline of its leases, by which it bounds a guarded
// transaction.
func TestContextCarriesTheDeadline(t *testing.T) {
	ctx := t.Context()
	set, err := lockset.Acquire(ctx, newLocks(t), names(t, "a", "b"), 10*time.Second)
	require.NoError(t, err)
	defer set.Release(ctx)
	d, ok := leasectx.Deadline(set.Context())
	require.True(t, ok)
	ls := set.Leases()
	assert.Equal(t, ls[0].Deadline(), d, "the first lease's, the earlier")
	assert.True(t, ls[1].Deadline().After(d))
}

// TestContextEndsWhenOneIsLost: the lock of one name disappears from
// Redis; the keep-alive finds it gone and the set's context ends, naming it.
func TestContextEndsWhenOneIsLost(t *testing.T) {
	ctx := t.Context()
	locks := newLocks(t)
	ns := names(t, "a", "b")
	a, b := ns[0], ns[1]
	set, err := lockset.Acquire(ctx, locks, []string{a, b}, 3*time.Second, lease.WithKeepAlive(100*time.Millisecond))
	require.NoError(t, err)
	defer set.Release(ctx)
	require.NoError(t, shared.Del(ctx, lockKey(b)).Err())
	select {
	case <-set.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the set's context did not end")
	}
	err = context.Cause(set.Context())
	assert.ErrorIs(t, err, lease.ErrLost)
	assert.Contains(t, err.Error(), b)
	assert.ErrorIs(t, set.Err(), lease.ErrLost)
	assert.False(t, set.Held())
	assert.True(t, set.Leases()[0].Held(), "the other lease is still held until Release: %v", set.Leases()[0].Err())
	err = set.Release(ctx)
	assert.ErrorIs(t, err, lease.ErrLost, "Release reports the lost one")
	assert.Empty(t, held(t, shared, a, b))
}

func TestInvalid(t *testing.T) {
	ctx := t.Context()
	locks := newLocks(t)
	for _, c := range []struct {
		what string
		err  error
	}{
		{"nil client", func() error { _, err := lockset.Acquire(ctx, nil, []string{"a"}, time.Second); return err }()},
		{"nil ctx", func() error {
			_, err := lockset.TryAcquire(nil, locks, []string{"a"}, time.Second) //nolint:staticcheck // the test
			return err
		}()},
		{"no names", func() error { _, err := lockset.Acquire(ctx, locks, nil, time.Second); return err }()},
		{"braced name", func() error { _, err := lockset.Acquire(ctx, locks, []string{"a", "{b}"}, time.Second); return err }()},
		{"bad ttl", func() error { _, err := lockset.Acquire(ctx, locks, names(t, "a"), 0); return err }()},
	} {
		assert.ErrorIs(t, c.err, lease.ErrInvalid, c.what)
	}
	var nilSet *lockset.Set
	assert.ErrorIs(t, nilSet.Release(ctx), lockset.ErrInvalid)
	assert.ErrorIs(t, nilSet.Err(), lockset.ErrInvalid)
	assert.False(t, nilSet.Held())
	assert.Empty(t, nilSet.Tokens())
	var nilClient *redis.Client
	_ = nilClient
	assert.True(t, errors.Is(lockset.ErrInvalid, lease.ErrInvalid))
}
