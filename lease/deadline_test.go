package lease_test

// Tests of the rule "no call outlives its context": every call that does I/O
// returns by its context's deadline (plus scheduling noise), whatever state
// the server is in. Housekeeping that must still happen after the deadline
// (releasing a lock whose acquire reply was lost) belongs in the background,
// not in the caller's time.

import (
	"context"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// pausedRedis starts a Redis only this test uses, with a context-honouring
// client on which a lock has been taken and released (so the connection is
// open and the scripts are cached), then pauses it. It is resumed at cleanup.
func pausedRedis(t *testing.T) (*testenv.Redis, *lease.Client) {
	t.Helper()
	r := testenv.NewRedis(t)
	t.Cleanup(func() { _ = r.Resume() })
	c, err := lease.New(testenv.CtxClient(t, r.Addr(), 5))
	require.NoError(t, err)
	warm(t, c)
	require.NoError(t, r.Pause())
	return r, c
}

// warm takes and releases a lock, which opens a connection and loads the
// acquire and release scripts.
func warm(t *testing.T, c *lease.Client) {
	t.Helper()
	l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
}

// acquireErr checks the error of an acquire that the deadline ended.
//
// context.DeadlineExceeded must be in the chain even when go-redis's read
// deadline, which ContextTimeoutEnabled sets to the context's, fires before
// the context's own timer, so that ctx.Err() may still be nil when the
// i/o timeout comes back. (On HEAD, Acquire's waitErr checks only ctx.Err():
// now and then TestAcquireDeadlineStalledSubscribe gets the bare
// "lease: subscribe ...: dial tcp ...: i/o timeout" instead.)
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

// TestAcquireDeadlineClosedPort: with nothing listening and go-redis
// retrying the refused dial past the deadline, TryAcquire and Acquire give
// up at the deadline, and the error names the refused dial.
//
// go-redis (v9.23) dials in a goroutine of its own, and the caller waiting
// for the connection gets plain ctx.Err() when its context ends; the dial's
// own error reaches only go-redis's log. The client's dial hook
// (family.Dials) recorded it, and the acquire's error names it while still
// wrapping ErrNotAcquired and context.DeadlineExceeded.
func TestAcquireDeadlineClosedPort(t *testing.T) {
	t.Parallel()
	for _, a := range acquireFuncs {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			addr := testenv.ClosedAddr(t)
			c, err := lease.New(testenv.CtxClient(t, addr, 5))
			require.NoError(t, err)
			err = testenv.WithinDeadline(t, a.name, func(ctx context.Context) error {
				_, err := a.f(c, ctx, name(t), time.Minute)
				return err
			})
			acquireErr(t, err)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED)
			assert.Contains(t, err.Error(), "context deadline exceeded (last dial to "+addr+": connect: connection refused)")
		})
	}
}

// TestAcquireDeadlineCauseOnlyOnDialFailure: an acquire that ends by its
// deadline while Redis answers (waiting on a held lock) names no dial.
// internal/family's tests cover a failure before the call and one followed
// by a successful dial.
func TestAcquireDeadlineCauseOnlyOnDialFailure(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	rdb := testenv.CtxClient(t, r.Addr(), 1)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	n := name(t)
	holder, err := c.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	defer holder.Release(context.Background())
	err = testenv.WithinDeadline(t, "Acquire", func(ctx context.Context) error {
		_, err := c.Acquire(ctx, n, time.Minute)
		return err
	})
	acquireErr(t, err)
	assert.NotContains(t, err.Error(), "last dial")
}

// TestAcquireDeadlineStalledSubscribe: Acquire finds the lock held, and the
// server stops answering just then, as it subscribes to the release channel
// on a new connection (modelled by a proxy that forwards the first
// connection and blackholes the later ones). Acquire gives up at the
// deadline: go-redis bounds the pub/sub handshake and Receive by the
// context's deadline.
func TestAcquireDeadlineStalledSubscribe(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	p := newStallProxy(t, r.Addr())
	c, err := lease.New(testenv.CtxClient(t, p.Addr(), 5))
	require.NoError(t, err)
	warm(t, c)

	n := name(t)
	other, err := lease.New(testenv.CtxClient(t, r.Addr(), 5))
	require.NoError(t, err)
	holder, err := other.TryAcquire(t.Context(), n, time.Minute)
	require.NoError(t, err)
	defer holder.Release(context.Background())

	p.stallNew()
	err = testenv.WithinDeadline(t, "Acquire", func(ctx context.Context) error {
		_, err := c.Acquire(ctx, n, time.Minute)
		return err
	})
	acquireErr(t, err)
	assert.Positive(t, p.stalled(), "the subscription's connection went to the blackhole")
}

// TestRefreshDeadline: Refresh on a paused or killed server gives up at the
// deadline and leaves the lease as it was.
func TestRefreshDeadline(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"paused", "killed"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			l := leaseThenFault(t, fault)
			err := testenv.WithinDeadline(t, "Refresh", func(ctx context.Context) error {
				return l.Refresh(ctx, time.Minute)
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NoError(t, l.Err(), "an I/O error leaves the lease as it was")
		})
	}
}

// TestReleaseDeadline: Release on a paused or killed server gives up at the
// deadline; the lease is over all the same.
func TestReleaseDeadline(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"paused", "killed"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			l := leaseThenFault(t, fault)
			err := testenv.WithinDeadline(t, "Release", func(ctx context.Context) error {
				return l.Release(ctx)
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, l.Err(), lease.ErrReleased)
		})
	}
}

// leaseThenFault takes a lease on a Redis of the test's own, then pauses
// or kills that server.
func leaseThenFault(t *testing.T, fault string) *lease.Lease {
	t.Helper()
	r := testenv.NewRedis(t)
	t.Cleanup(func() { _ = r.Resume() })
	c, err := lease.New(testenv.CtxClient(t, r.Addr(), 5))
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), name(t), time.Minute)
	require.NoError(t, err)
	switch fault {
	case "paused":
		require.NoError(t, r.Pause())
	case "killed":
		require.NoError(t, r.Kill())
	default:
		t.Fatalf("unknown fault %q", fault)
	}
	return l
}

// stallProxy forwards TCP connections to a backend until stallNew is
// called; connections accepted after that are held open and read, but
// nothing is forwarded or answered: a server that stopped answering, for
// new connections only.
type stallProxy struct {
	ln      net.Listener
	backend string

	mu     sync.Mutex
	stall  bool
	nStall int
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newStallProxy(t *testing.T, backend string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, backend: backend}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) Addr() string { return p.ln.Addr().String() }

func (p *stallProxy) stallNew() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = true
}

// stalled returns how many connections went to the blackhole.
func (p *stallProxy) stalled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nStall
}

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		stall := p.stall
		if stall {
			p.nStall++
		}
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if stall {
			p.wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
			continue
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, b)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(b, c); b.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, b); c.Close() })
	}
}

func (p *stallProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestReleaseDeadlineDuringKeepAlive: a keep-alive refresh stuck on a paused
// server (bounded by its 3s interval) must not hold Release past its own
// deadline: Release ends the lease first, which cancels the refresh in
// flight. With a plain mutex, Release queued behind the refresh for the
// rest of the interval (about 2.7s here).
func TestReleaseDeadlineDuringKeepAlive(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	t.Cleanup(func() { _ = r.Resume() })
	c, err := lease.New(testenv.CtxClient(t, r.Addr(), 5))
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), name(t), 30*time.Second, lease.WithKeepAlive(3*time.Second))
	require.NoError(t, err)
	time.Sleep(2800 * time.Millisecond)
	require.NoError(t, r.Pause())
	time.Sleep(500 * time.Millisecond) // the refresh of the 3s tick is stuck now
	err = testenv.WithinDeadline(t, "Release", func(ctx context.Context) error { return l.Release(ctx) })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, l.Err(), lease.ErrReleased)
	assert.NoError(t, l.Release(t.Context()), "the second release returns nil")
}
