package redlock_test

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
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
	"github.com/fencelock/fencelock/verifier"
)

// TestReissueWithMinorityRestartedEmpty: five real nodes, a minority (2)
// restarted empty while the lease is held. Reissue still has a majority:
// the new token is above the floor and every counter that answered, it is
// written back to all five nodes (the restarted ones get the counter), the
// holding nodes store it, and the next acquisition is above it.
func TestReissueWithMinorityRestartedEmpty(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, rdbs, redlock.WithQuorumFencing(true))
	n := name(t)
	keys := protocol.KeysFor(lease.DefaultPrefix, n)
	for range 3 {
		acquireSeq(t, ctx, c, n)
	}
	l, err := c.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err)

	restart(t, ctx, rs, []int{0, 3})
	// A floor above every node's clock: the restarted nodes' counters start
	// from their clocks (the counter rule), the others' are at the token.
	floor := l.Token().Seq + 1e9
	tok, err := l.Reissue(ctx, floor)
	require.NoError(t, err)
	assert.Equal(t, floor+1, tok.Seq, "above the floor")
	assert.Equal(t, tok, l.Token())
	assert.Equal(t, l.Holder(), tok.Holder)
	for i, rdb := range rdbs {
		st, err := protocol.Inspect(ctx, rdb, keys)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, st.LastSeq, tok.Seq, "node %d's counter", i)
		if i == 0 || i == 3 {
			assert.Empty(t, st.Holder, "restarted node %d lost the key", i)
		} else {
			assert.Equal(t, tok.Seq, st.Seq, "node %d stores the new token", i)
		}
	}
	require.NoError(t, l.Refresh(ctx, 30*time.Second), "refresh sets the key again on the restarted nodes")
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Equal(t, tok, info.Token)
	for i, ni := range info.Nodes {
		assert.Equal(t, tok, ni.Token, "node %d after refresh", i)
	}
	require.NoError(t, l.Release(ctx))
	assert.Greater(t, acquireSeq(t, ctx, c, n), tok.Seq)

	// A lease that lost its majority cannot reissue: the lease ends.
	l, err = c.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err)
	restart(t, ctx, rs, []int{1, 2, 4})
	_, err = l.Reissue(ctx, 1000)
	assert.ErrorIs(t, err, lease.ErrLost)
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
}

// TestHealWriteRedlock: after every node restarted empty, the next holder's
// token repeats Seqs the storage has seen; the verifier refuses it, and
// heal.Write reissues above the storage's highest Seq and the write lands.
func TestHealWriteRedlock(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, rdbs, redlock.WithQuorumFencing(true))
	n := name(t)
	v := verifier.NewMemory()
	writes := 0
	write := func(ctx context.Context, tok fence.Token) error {
		return v.Do(ctx, n, tok, func() error { writes++; return nil })
	}
	// Counters lifted above the nodes' clocks (the storage had seen tokens
	// of another deployment) are the ones a restart makes go back: a
	// missing counter starts from the clock (the counter rule).
	_, err := c.Advance(ctx, n, uint64(time.Now().UnixMicro())+1e10)
	require.NoError(t, err)
	for range 5 {
		l, err := c.TryAcquire(ctx, n, 30*time.Second)
		require.NoError(t, err)
		require.NoError(t, write(ctx, l.Token()))
		require.NoError(t, l.Release(ctx))
	}
	restart(t, ctx, rs, []int{0, 1, 2, 3, 4})

	l, err := c.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err)
	defer l.Release(context.WithoutCancel(ctx))
	require.ErrorIs(t, write(ctx, l.Token()), verifier.ErrStale, "the counters went backwards")
	require.NoError(t, heal.Write(ctx, l, write))
	assert.Equal(t, 6, writes)
	seq, _ := v.Highest(n)
	assert.Greater(t, seq, uint64(time.Now().UnixMicro())+1e9)
	assert.Equal(t, l.Token().Seq, seq)
}

// TestWithHolderReacquires: a process that saved its holder id gets the same
// lease back, with the same token, even after a minority restarted empty;
// another holder id does not.
func TestWithHolderReacquires(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, rdbs, redlock.WithQuorumFencing(true))
	n := name(t)
	acquireSeq(t, ctx, c, n)
	first, err := c.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err)
	saved := first.Token()

	restart(t, ctx, rs, []int{2, 4})
	again, err := c.TryAcquire(ctx, n, 30*time.Second, lease.WithHolder(saved.Holder))
	require.NoError(t, err)
	assert.Equal(t, saved, again.Token(), "the same token")
	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	for i, ni := range info.Nodes {
		assert.Equal(t, saved, ni.Token, "node %d holds the same token again", i)
	}

	_, err = c.TryAcquire(ctx, n, 30*time.Second, lease.WithHolder("someone-else"))
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	_, err = c.TryAcquire(ctx, n, 30*time.Second, lease.WithHolder("bad id!"))
	assert.ErrorIs(t, err, lease.ErrInvalid)

	require.NoError(t, again.Release(ctx))
	next, err := c.TryAcquire(ctx, n, 30*time.Second, lease.WithHolder(saved.Holder))
	require.NoError(t, err, "free again: a new acquisition under the same id")
	assert.Greater(t, next.Token().Seq, saved.Seq)
	require.NoError(t, next.Release(ctx))
}

// TestInspect reads the majority's view and each node's; a stopped node is
// reported in its NodeInfo, not as a failure of the whole call.
func TestInspect(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, rdbs, redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(500*time.Millisecond))
	n := name(t)

	info, err := c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Empty(t, info.Holder)
	assert.True(t, info.Token.IsZero())
	assert.Len(t, info.Nodes, 5)

	l, err := c.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err)
	defer l.Release(context.WithoutCancel(ctx))
	require.NoError(t, rs[1].Stop())
	info, err = c.Inspect(ctx, n)
	require.NoError(t, err)
	assert.Equal(t, l.Token(), info.Token)
	assert.Equal(t, l.Holder(), info.Holder)
	assert.Greater(t, info.TTL, 20*time.Second)
	assert.Equal(t, l.Token().Seq, info.LastSeq)
	var ne *redlock.NodeError
	assert.ErrorAs(t, info.Nodes[1].Err, &ne)
	assert.Equal(t, rdbs[1].(*redis.Client).Options().Addr, info.Nodes[1].Addr)

	_, err = c.Inspect(ctx, "bad{name}")
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// TestRedlockContextAndRelease: the lease's Context ends with it; a
// release racing refreshes wins for good (the refresh re-sets lost keys, so
// without serialisation it could bring the lock back after the release);
// the second Release returns nil.
func TestRedlockContextAndRelease(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	c := newLocker(t, sharedRDB, redlock.WithQuorumFencing(true))
	n := name(t)
	keys := protocol.KeysFor(lease.DefaultPrefix, n)
	l, err := c.TryAcquire(ctx, n, 30*time.Second)
	require.NoError(t, err)
	lctx := l.Context()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if err := l.Refresh(ctx, 30*time.Second); err != nil {
					if !errors.Is(err, lease.ErrReleased) {
						t.Errorf("refresh: %v", err)
					}
					return
				}
			}
		})
	}
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, l.Release(ctx))
	wg.Wait()
	<-lctx.Done()
	assert.ErrorIs(t, context.Cause(lctx), lease.ErrReleased)
	assert.ErrorIs(t, context.Cause(lctx), lease.ErrReleased)
	assert.NoError(t, l.Release(ctx))
	for i, rdb := range sharedRDB {
		st, err := protocol.Inspect(ctx, rdb, keys)
		require.NoError(t, err)
		assert.Empty(t, st.Holder, "node %d", i)
	}
}

// TestRedlockInputRules: the lease's ttl and keep-alive rules, and nil and
// typed-nil input, all refused with ErrInvalid before any I/O.
func TestRedlockInputRules(t *testing.T) {
	ctx := ctxFor(t, 10*time.Second)
	c := newLocker(t, sharedRDB)
	n := name(t)
	for _, ttl := range []time.Duration{time.Millisecond, 2 * time.Millisecond} {
		_, err := c.TryAcquire(ctx, n, ttl)
		assert.ErrorIs(t, err, lease.ErrInvalid, "ttl %v", ttl)
	}
	for _, every := range []time.Duration{time.Nanosecond, 10 * time.Second} {
		_, err := c.TryAcquire(ctx, n, time.Second, lease.WithKeepAlive(every))
		assert.ErrorIs(t, err, lease.ErrInvalid, "keep-alive %v", every)
	}
	var typed *redis.Client
	_, err := redlock.New([]redis.UniversalClient{sharedRDB[0], typed, sharedRDB[2]})
	assert.ErrorIs(t, err, lease.ErrInvalid, "typed nil node")
	_, err = redlock.New(sharedRDB[:3], nil)
	assert.ErrorIs(t, err, lease.ErrInvalid, "nil option")
	var nilCtx context.Context
	_, err = c.TryAcquire(nilCtx, n, time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = c.Acquire(nilCtx, n, time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = c.TryAcquire(ctx, n, time.Second, nil)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	var nc *lease.Client
	_, err = nc.TryAcquire(ctx, n, time.Second)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = nc.Advance(ctx, n, 1)
	assert.ErrorIs(t, err, lease.ErrInvalid)

	l, err := c.TryAcquire(ctx, n, time.Second)
	require.NoError(t, err)
	_, err = l.Reissue(ctx, 5)
	assert.ErrorIs(t, err, lease.ErrInvalid, "Reissue needs quorum fencing")
	assert.NoError(t, l.Err(), "and that does not end the lease")
	require.NoError(t, l.Release(ctx))
}

// TestCloseWaitsForCleanup: Close returns once the background release of a
// failed attempt is done, and refuses a nil context.
func TestCloseWaitsForCleanup(t *testing.T) {
	c := newLocker(t, sharedRDB)
	var nilCtx context.Context
	assert.ErrorIs(t, c.Close(nilCtx), lease.ErrInvalid)
	var nc *lease.Client
	assert.ErrorIs(t, nc.Close(t.Context()), lease.ErrInvalid)
	require.NoError(t, c.Close(t.Context()), "nothing pending")
	_, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	assert.ErrorIs(t, err, lease.ErrInvalid, "closed")
}
