package redlock_test

// Tests of the rule "no call outlives its context": every call that does I/O
// returns by its context's deadline (plus scheduling noise), whatever state
// the nodes are in, even when the node timeout is longer. Housekeeping that
// must still happen after the deadline (releasing a failed attempt's lock on
// the nodes whose reply was lost, releasing a lost lease everywhere) belongs
// in the background, not in the caller's time.

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// slowNodeTimeout is the redlock node timeout here: far longer than the
// call deadline, so that only the context can end a call in time.
const slowNodeTimeout = 1500 * time.Millisecond

// closedNodes returns clients for n loopback addresses nothing listens on.
func closedNodes(t *testing.T, n, dialerRetries int) []redis.UniversalClient {
	t.Helper()
	rdbs := make([]redis.UniversalClient, n)
	for i := range rdbs {
		rdbs[i] = testenv.CtxClient(t, testenv.ClosedAddr(t), dialerRetries)
	}
	return rdbs
}

// pausableNodes starts three masters only this test uses, each resumed at
// cleanup, and returns them with a context-honouring client for each.
func pausableNodes(t *testing.T) ([]*testenv.Redis, []redis.UniversalClient) {
	t.Helper()
	rs := testenv.NewRedisN(t, 3)
	rdbs := make([]redis.UniversalClient, len(rs))
	for i, r := range rs {
		t.Cleanup(func() { _ = r.Resume() })
		rdbs[i] = testenv.CtxClient(t, r.Addr(), 5)
	}
	return rs, rdbs
}

// ctxNodes starts three masters only this test uses, each resumed at
// cleanup, and returns a redlock client over context-honouring clients for
// them, with a slow node timeout. A lock has been taken and released, so
// the connections are open and the scripts cached.
func ctxNodes(t *testing.T) ([]*testenv.Redis, *lease.Client) {
	t.Helper()
	rs, rdbs := pausableNodes(t)
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(slowNodeTimeout))
	l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
	return rs, c
}

// fault pauses or kills the servers rs[i] for i in idx.
func fault(t *testing.T, how string, rs []*testenv.Redis, idx ...int) {
	t.Helper()
	for _, i := range idx {
		switch how {
		case "paused":
			require.NoError(t, rs[i].Pause())
		case "killed":
			require.NoError(t, rs[i].Kill())
		default:
			t.Fatalf("unknown fault %q", how)
		}
	}
}

// acquireErr checks the error of an acquire that the deadline ended.
//
// context.DeadlineExceeded must be in the chain even when go-redis's read
// deadline, which ContextTimeoutEnabled sets to the context's, fires before
// the context's own timer: then the caller's ctx.Err() may still be nil when
// the node's i/o timeout comes in, and the failure must not be taken for a
// node timeout. (On HEAD, nodeErr checks only parent.Err(), and about one
// Refresh or Release in four on a paused majority reports "node did not
// answer in time (1.5s)" instead.)
func acquireErr(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

type acquireFunc func(c *lease.Client, ctx context.Context, name string, ttl time.Duration, opts ...lease.AcquireOption) (*lease.Lease, error)

var acquireFuncs = []struct {
	name string
	f    acquireFunc
}{
	{"TryAcquire", (*lease.Client).TryAcquire},
	{"Acquire", (*lease.Client).Acquire},
}

// TestAcquireDeadlineClosedPorts: with nothing listening on any node and
// go-redis retrying the refused dials past the deadline, TryAcquire and
// Acquire give up at the deadline, with an error per node.
//
// The refusals are not in the error: go-redis (v9.23) dials in a goroutine
// of its own, on context.Background() (pool.queuedNewConn), and the caller
// waiting for the connection returns plain ctx.Err() when its context ends;
// the dial's own error only reaches go-redis's log, later. (fanout, which
// stops waiting at the deadline, would drop a late cause anyway.)
// TestAcquireDeadlineRefusedInTime checks that the cause is kept when the
// refusals come before the deadline.
func TestAcquireDeadlineClosedPorts(t *testing.T) {
	t.Parallel()
	for _, a := range acquireFuncs {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			c := newLocker(t, closedNodes(t, 3, 5), redlock.WithNodeTimeout(slowNodeTimeout))
			err := testenv.WithinDeadline(t, a.name, func(ctx context.Context) error {
				_, err := a.f(c, ctx, name(t), time.Minute)
				return err
			})
			acquireErr(t, err)
			assert.ElementsMatch(t, nodeAddrs(t, c), addrs(nodeErrors(err)), "an error per node")
			// Each node's error names its refused dial, which go-redis
			// drops when the context ends during its dial retries.
			for _, ne := range nodeErrors(err) {
				assert.ErrorIs(t, ne, syscall.ECONNREFUSED)
				assert.ErrorContains(t, ne, "(last dial to "+ne.Addr+": connect: connection refused)")
			}
		})
	}
}

// TestNodeTimeoutNamesRefusedDial: with nothing listening on any node and
// go-redis retrying the dial for longer than the node timeout, each node's
// error is ErrNodeTimeout and names the refused dial.
func TestNodeTimeoutNamesRefusedDial(t *testing.T) {
	t.Parallel()
	c := newLocker(t, closedNodes(t, 3, 5), redlock.WithNodeTimeout(50*time.Millisecond))
	_, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context did not end")
	nes := nodeErrors(err)
	assert.GreaterOrEqual(t, len(nes), quorumOf(t, c), "an error per failed node: %v", err)
	for _, ne := range nes {
		assert.ErrorIs(t, ne, redlock.ErrNodeTimeout)
		assert.ErrorIs(t, ne, syscall.ECONNREFUSED)
		assert.ErrorContains(t, ne, "(last dial to "+ne.Addr+": connect: connection refused)")
	}
}

// TestAcquireDeadlineRefusedInTime: with nothing listening on any node and
// clients that dial once (as the package docs advise), the refusals come
// before the deadline: TryAcquire and Acquire return them at once.
func TestAcquireDeadlineRefusedInTime(t *testing.T) {
	t.Parallel()
	for _, a := range acquireFuncs {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			c := newLocker(t, closedNodes(t, 3, 1), redlock.WithNodeTimeout(slowNodeTimeout))
			err := testenv.WithinDeadline(t, a.name, func(ctx context.Context) error {
				_, err := a.f(c, ctx, name(t), time.Minute)
				return err
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, lease.ErrNotAcquired)
			assert.ErrorContains(t, err, "connection refused")
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "the refusals came before the deadline")
			// Once a majority refused, the attempt stops waiting for the
			// rest: a majority of nodes is named, maybe not all.
			failed := addrs(nodeErrors(err))
			assert.Subset(t, nodeAddrs(t, c), failed)
			assert.GreaterOrEqual(t, len(failed), quorumOf(t, c), "an error per refusing node: %v", failed)
		})
	}
}

// TestRefreshDeadline: Refresh with a majority of nodes paused or killed
// gives up at the deadline and leaves the lease as it was.
func TestRefreshDeadline(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"paused", "killed"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			rs, c := ctxNodes(t)
			l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
			require.NoError(t, err)
			fault(t, how, rs, 1, 2)
			err = testenv.WithinDeadline(t, "Refresh", func(ctx context.Context) error {
				return l.Refresh(ctx, time.Minute)
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline, not a node timeout (see acquireErr)")
			assert.NoError(t, l.Err(), "a refresh that could not confirm the lease leaves it as it was")
		})
	}
}

// TestRefreshDeadlineLost: a Refresh that finds the lease gone from a
// majority (two nodes lost the key) while the third node does not answer
// ends the lease and gives up at the deadline. The release on every node
// that follows a loss must not be made on the caller's time.
func TestRefreshDeadlineLost(t *testing.T) {
	t.Parallel()
	rs, c := ctxNodes(t)
	l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.NoError(t, err)
	for _, r := range rs[:2] {
		rdb := r.Client()
		require.NoError(t, rdb.FlushAll(t.Context()).Err())
		rdb.Close()
	}
	fault(t, "paused", rs, 2)
	err = testenv.WithinDeadline(t, "Refresh", func(ctx context.Context) error {
		return l.Refresh(ctx, time.Minute)
	})
	assert.ErrorIs(t, err, lease.ErrLost)
	assert.ErrorIs(t, l.Err(), lease.ErrLost)
}

// TestReleaseDeadline: Release with a majority of nodes paused or killed
// gives up at the deadline; the lease is over all the same.
func TestReleaseDeadline(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"paused", "killed"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			rs, c := ctxNodes(t)
			l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
			require.NoError(t, err)
			fault(t, how, rs, 1, 2)
			err = testenv.WithinDeadline(t, "Release", func(ctx context.Context) error {
				return l.Release(ctx)
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline, not a node timeout (see acquireErr)")
			assert.ErrorIs(t, l.Err(), lease.ErrReleased)
		})
	}
}

// TestAcquireFrozenMajorityGivesUpAfterTTL: with a majority of the nodes
// paused, a waiting Acquire whose context has no deadline retries the node
// timeouts (they may be a passing load), but once every attempt for a
// whole ttl failed a majority, it returns: the lock service is
// unavailable. The error is not the context's (it has not ended) and names
// the paused nodes' timeouts.
func TestAcquireFrozenMajorityGivesUpAfterTTL(t *testing.T) {
	t.Parallel()
	rs, rdbs := pausableNodes(t)
	c := newLocker(t, rdbs, redlock.WithNodeTimeout(50*time.Millisecond))
	fault(t, "paused", rs, 1, 2)
	const ttl = time.Second
	start := time.Now()
	ctx := context.WithoutCancel(t.Context()) // no deadline
	_, err := c.Acquire(ctx, name(t), ttl)
	took := time.Since(start)
	require.Error(t, err)
	t.Logf("gave up after %v: %v", took.Round(time.Millisecond), err)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "the lock service is unavailable")
	assert.ErrorIs(t, err, redlock.ErrNodeTimeout)
	assert.GreaterOrEqual(t, took, ttl, "it retried the timeouts for a whole ttl")
}

// TestAcquireFrozenMajorityHeldLockGivesUp: as above, on a lock that
// another client holds on every node. The node that answers says "held",
// one paused node times out, and the try stops waiting for the other
// paused node (no majority can grant it any more): that node, not awaited,
// counts toward "no majority possible" too, so the Acquire still gives up
// after a ttl of such tries. Before, it was counted as neither, every try
// reset the unavailability clock, and the Acquire waited for as long as its
// context lived.
func TestAcquireFrozenMajorityHeldLockGivesUp(t *testing.T) {
	t.Parallel()
	rs, rdbs := pausableNodes(t)
	n := name(t)
	other := newLocker(t, rdbs)
	_, err := other.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	c, err := redlock.New(rdbs) // the default node timeout
	require.NoError(t, err)
	fault(t, "paused", rs, 1, 2)
	const ttl = 1500 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context()) // no deadline
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Acquire(ctx, n, ttl)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(5 * ttl):
		cancel()
		<-done
		t.Fatalf("Acquire still waits after %v (5 ttls) on a frozen majority", time.Since(start).Round(time.Millisecond))
	}
	t.Logf("gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.NotErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "the lock service is unavailable")
}

// TestFrozenMinorityCostsATryLittle: with one node of three paused, a try
// that the other two granted waits for the paused node only a moment more
// (the minimum node timeout, 50ms), not the whole default node timeout (a
// tenth of the ttl: 2s here), and so does a refresh.
func TestFrozenMinorityCostsATryLittle(t *testing.T) {
	t.Parallel()
	rs, rdbs := pausableNodes(t)
	c, err := redlock.New(rdbs, redlock.WithQuorumFencing(true))
	require.NoError(t, err)
	const ttl = 20 * time.Second
	warm, err := c.TryAcquire(t.Context(), name(t), ttl)
	require.NoError(t, err)
	require.NoError(t, warm.Release(t.Context()))
	fault(t, "paused", rs, 2)
	for range 3 {
		start := time.Now()
		l, err := c.TryAcquire(t.Context(), name(t), ttl)
		require.NoError(t, err)
		took := time.Since(start)
		require.NoError(t, l.Refresh(t.Context(), ttl))
		refreshed := time.Since(start) - took
		t.Logf("acquired in %v, refreshed in %v", took.Round(time.Millisecond), refreshed.Round(time.Millisecond))
		assert.Less(t, took, ttl/10, "the try waited the whole node timeout for the paused node")
		assert.Less(t, refreshed, ttl/10, "the refresh waited the whole node timeout for the paused node")
	}
}
