package leasetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
)

// Reacquire checks an acquire under a known holder id (the kind's
// WithHolder): while that holder has the lock, a second acquire with the
// saved id, from another client, gets the same token back and the lock's
// ttl on the servers is extended to the new one; another id, or none, does not get it; after the release, the
// same id gets a new, greater token.
func reacquire(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c, restarted, other := h.New(t, s.Addrs), h.New(t, s.Addrs), h.New(t, s.Addrs)
	n := lockName(t)
	id := newHolder()
	const short = 500 * time.Millisecond
	first := try(t, c, n, short, Opts{Holder: id})
	saved := first.Token()
	require.Equal(t, fence.Token{Key: n, Seq: saved.Seq, Holder: id}, saved, "the lease is under the given holder id")

	again := try(t, restarted, n, time.Minute, Opts{Holder: id})
	assert.Equal(t, saved, again.Token(), "the same token back")
	requireLive(t, again, "the re-acquired lease")
	waitDone(t, first, short+5*time.Second)
	time.Sleep(short) // past the first ttl on the servers too
	requireLive(t, again, "the re-acquired lease, past the first one's ttl")

	_, err := other.TryAcquire(ctx, n, time.Minute, Opts{Holder: newHolder()})
	assert.ErrorIs(t, err, h.NotAcquired, "another holder id")
	_, err = other.TryAcquire(ctx, n, time.Minute, Opts{})
	assert.ErrorIs(t, err, h.NotAcquired, "a fresh holder id")
	_, err = other.TryAcquire(ctx, n, time.Minute, Opts{Holder: "bad id!"})
	assert.ErrorIs(t, err, h.Invalid, "a malformed holder id")

	require.NoError(t, again.Release(ctx))
	next := try(t, restarted, n, time.Minute, Opts{Holder: id})
	assert.Greater(t, next.Token().Seq, saved.Seq, "free again: a new acquisition under the same id")
	require.NoError(t, next.Release(ctx))
}

// Reissue checks that Reissue above a floor gives the lease a greater
// token, which it keeps (Token, Refresh), under the same name and holder,
// and that the next holder's token is greater still.
func reissue(t *testing.T, h Harness, s servers) {
	ctx := ctxFor(t, 30*time.Second)
	c, other := h.New(t, s.Addrs), h.New(t, s.Addrs)
	n := lockName(t)
	l := try(t, c, n, time.Minute, Opts{})
	old := l.Token()
	require.Positive(t, old.Seq, "the kind's tokens are fenced")
	floor := old.Seq + 1_000_000
	tok, err := l.Reissue(ctx, floor)
	require.NoError(t, err)
	assert.Greater(t, tok.Seq, floor, "above the floor")
	assert.Equal(t, old.Key, tok.Key)
	assert.Equal(t, old.Holder, tok.Holder)
	assert.Equal(t, tok, l.Token(), "the lease keeps the new token")
	require.NoError(t, l.Refresh(ctx, time.Minute))
	assert.Equal(t, tok, l.Token(), "Refresh keeps it")
	requireLive(t, l, "the reissued lease")

	low, err := l.Reissue(ctx, 1)
	require.NoError(t, err, "a floor below the token")
	assert.Greater(t, low.Seq, tok.Seq, "a reissue always gives a greater token")
	require.NoError(t, l.Release(ctx))

	next := try(t, other, n, time.Minute, Opts{})
	assert.Greater(t, next.Token().Seq, low.Seq, "the next holder's token is above the reissued one")
}

// Order checks exclusion and token order: workers goroutines, each with a
// client of its own, take one lock rounds times with Acquire; no two held
// windows overlap (a counter of holders inside), and every token is
// greater than the previous holder's.
func order(t *testing.T, h Harness, s servers, workers, rounds int) {
	ctx := ctxFor(t, 2*time.Minute)
	n := lockName(t)
	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		total    atomic.Int32
		mu       sync.Mutex
		last     fence.Token // of the previous holder; read and set while holding
		backward []string
		wg       sync.WaitGroup
	)
	for w := range workers {
		c := h.New(t, s.Addrs)
		wg.Go(func() {
			for r := range rounds {
				l, err := c.Acquire(ctx, n, 10*time.Second, Opts{})
				if !assert.NoError(t, err, "worker %d round %d", w, r) {
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				tok := l.Token()
				mu.Lock()
				if tok.Seq <= last.Seq {
					backward = append(backward, fmt.Sprintf("%d after %d", tok.Seq, last.Seq))
				}
				last = tok
				mu.Unlock()
				total.Add(1)
				time.Sleep(time.Duration(r%3) * 200 * time.Microsecond) // the critical section
				assert.NoError(t, l.Err(), "the lease ended inside the critical section")
				inside.Add(-1)
				assert.NoError(t, l.Release(context.WithoutCancel(ctx)), "worker %d round %d", w, r)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(workers*rounds), total.Load(), "acquisitions")
	assert.Zero(t, overlaps.Load(), "held windows overlapped")
	assert.Empty(t, backward, "tokens that were not greater than the previous holder's")
}
