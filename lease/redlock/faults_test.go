package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// nodeErrors returns every *NodeError in err's tree.
func nodeErrors(err error) []*redlock.NodeError {
	var out []*redlock.NodeError
	var walk func(error)
	walk = func(err error) {
		if ne, ok := err.(*redlock.NodeError); ok {
			out = append(out, ne)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

func addrs(nes []*redlock.NodeError) []string {
	var out []string
	for _, ne := range nes {
		out = append(out, ne.Addr)
	}
	return out
}

// TestMinorityDownMajorityDown stops two of five nodes (the lock still
// works), then a third (it fails fast, naming the three nodes).
func TestMinorityDownMajorityDown(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(time.Second), redlock.WithQuorumFencing(true))
	n := name(t)

	require.NoError(t, rs[1].Stop())
	require.NoError(t, rs[3].Stop())
	l, err := c.TryAcquire(ctx, n, 10*time.Second)
	require.NoError(t, err, "3 of 5 nodes are up")
	err = l.Release(ctx)
	assert.NotErrorIs(t, err, lease.ErrLost, "released on the 3 live nodes")
	assert.ElementsMatch(t, []string{rs[1].Addr(), rs[3].Addr()}, addrs(nodeErrors(err)),
		"release reports the stopped nodes: %v", err)

	l, err = c.Acquire(ctx, n, 10*time.Second)
	require.NoError(t, err, "waiting acquire with 3 of 5 nodes")
	require.Error(t, l.Release(ctx))

	require.NoError(t, rs[4].Stop())
	for _, try := range []struct {
		name string
		f    func(context.Context, string, time.Duration, ...lease.AcquireOption) (*lease.Lease, error)
	}{{"TryAcquire", c.TryAcquire}, {"Acquire", c.Acquire}} {
		start := time.Now()
		_, err = try.f(ctx, n, 10*time.Second)
		elapsed := time.Since(start)
		require.Error(t, err, try.name)
		assert.ErrorIs(t, err, lease.ErrNotAcquired, try.name)
		var ne *redlock.NodeError
		require.True(t, errors.As(err, &ne), "%s: %v", try.name, err)
		assert.ElementsMatch(t, []string{rs[1].Addr(), rs[3].Addr(), rs[4].Addr()}, addrs(nodeErrors(err)), try.name)
		for _, r := range rs[3:] {
			assert.Contains(t, err.Error(), r.Addr(), try.name)
		}
		// Fast: refused connections, no wait for the node timeout (1s) or
		// a backoff.
		assert.Less(t, elapsed, 500*time.Millisecond, "%s took %v", try.name, elapsed)
		t.Logf("%s with 3 of 5 down failed in %v:\n%v", try.name, elapsed, err)
		// The failed attempt released what the live nodes granted.
		for _, i := range []int{0, 2} {
			st, err := protocol.Inspect(ctx, rdbs[i], protocol.KeysFor(lease.DefaultPrefix, n))
			require.NoError(t, err)
			assert.Empty(t, st.Holder, "%s: node %d", try.name, i)
		}
	}
}

// TestRefreshWithoutQuorumKeepsLease: when a majority cannot answer, a
// refresh fails but does not end the lease; its deadline still runs.
func TestRefreshWithoutQuorumKeepsLease(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(200*time.Millisecond))
	l, err := c.TryAcquire(ctx, name(t), 10*time.Second)
	require.NoError(t, err)
	deadline := l.Deadline()

	for _, r := range rs[2:] {
		require.NoError(t, r.Stop())
	}
	err = l.Refresh(ctx, 10*time.Second)
	require.Error(t, err)
	assert.NotErrorIs(t, err, lease.ErrLost)
	assert.ElementsMatch(t, []string{rs[2].Addr(), rs[3].Addr(), rs[4].Addr()}, addrs(nodeErrors(err)))
	assert.NoError(t, l.Err())
	assert.Equal(t, deadline, l.Deadline())

	for _, r := range rs[2:] {
		require.NoError(t, r.Start(ctx))
	}
	// The restarted nodes lost the key; two nodes still hold it, which is
	// no majority: now the lease is lost.
	err = l.Refresh(ctx, 10*time.Second)
	assert.ErrorIs(t, err, lease.ErrLost)
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
}

// TestPausedNodeDoesNotStall SIGSTOPs one node for longer than the node
// timeout: acquire and release go on without it.
func TestPausedNodeDoesNotStall(t *testing.T) {
	rs, rdbs := ownNodes(t, 5)
	ctx := ctxFor(t, 20*time.Second)
	const nodeTimeout = 100 * time.Millisecond
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuorumFencing(true))
	n := name(t)

	faults.Pause(t, rs[2])
	for range 3 {
		start := time.Now()
		l, err := c.TryAcquire(ctx, n, 10*time.Second)
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Less(t, elapsed, nodeTimeout+300*time.Millisecond, "acquire")
		assert.GreaterOrEqual(t, time.Until(l.Deadline()), 10*time.Second-102*time.Millisecond-elapsed-time.Millisecond)

		start = time.Now()
		err = l.Release(ctx)
		elapsed = time.Since(start)
		assert.Less(t, elapsed, nodeTimeout+300*time.Millisecond, "release")
		assert.ErrorIs(t, err, redlock.ErrNodeTimeout)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context did not end")
		assert.Equal(t, []string{rs[2].Addr()}, addrs(nodeErrors(err)))
	}
	require.NoError(t, rs[2].Resume())
}
