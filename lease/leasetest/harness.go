package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// Harness adapts one lease kind to the suite. It takes plain functions and
// values, so that it does not depend on the kind's option types.
type Harness struct {
	// Servers is how many redis-servers one client of the kind runs on:
	// 1 for a lease on one Redis, 3 for Redlock.
	Servers int
	// New returns a new client of the kind over the redis-servers at addrs
	// ("host:port", len(addrs) == Servers), closing what it opens at
	// t.Cleanup. Its connections must honour context deadlines (go-redis:
	// ContextTimeoutEnabled) and dial once, because the suite freezes and
	// kills a majority of a client's servers and points clients at closed
	// ports. Its tokens must be fenced (Redlock: quorum fencing on).
	New func(t testing.TB, addrs []string) Client
	// NilClient wraps a typed nil client of the kind, such as a nil
	// *lease.Client: its calls must return an error wrapping Invalid.
	NilClient Client
	// NilLease is a typed nil lease of the kind, such as a nil *lease.Lease.
	NilLease Lease
	// The kind's sentinel errors. Each must wrap the lease package's of the
	// same meaning (lease.ErrNotAcquired, ErrLost, ErrReleased, ErrInvalid),
	// or be it.
	NotAcquired, Lost, Released, Invalid error
}

// Client is one client of the kind, seen through its two acquires.
// An adapter passes the lease it got on, a typed nil included.
type Client struct {
	// TryAcquire tries once to take lock name for ttl.
	TryAcquire func(ctx context.Context, name string, ttl time.Duration, o Opts) (Lease, error)
	// Acquire waits for lock name until ctx ends.
	Acquire func(ctx context.Context, name string, ttl time.Duration, o Opts) (Lease, error)
}

// Opts are the per-acquire options the suite uses; an adapter turns them
// into the kind's own.
type Opts struct {
	// Holder, when not empty, acquires under this holder id (the kind's
	// WithHolder) instead of a fresh random one.
	Holder string
	// KeepAlive turns the kind's keep-alive on at its default interval.
	KeepAlive bool
}

// Lease is a lease as the suite sees it: what *lease.Lease does, for
// kinds of this module and of others.
type Lease interface {
	Token() fence.Token
	Done() <-chan struct{}
	Err() error
	Context() context.Context
	Held() bool
	Deadline() time.Time
	Refresh(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
	Reissue(ctx context.Context, floor uint64) (fence.Token, error)
}

// ClientOf is the kit's Client over a *lease.Client of either kind of
// this module.
func ClientOf(c *lease.Client) Client {
	wrap := func(l *lease.Lease, err error) (Lease, error) {
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return Client{
		TryAcquire: func(ctx context.Context, name string, ttl time.Duration, o Opts) (Lease, error) {
			return wrap(c.TryAcquire(ctx, name, ttl, o.acquireOptions()...))
		},
		Acquire: func(ctx context.Context, name string, ttl time.Duration, o Opts) (Lease, error) {
			return wrap(c.Acquire(ctx, name, ttl, o.acquireOptions()...))
		},
	}
}

// acquireOptions are o as lease's acquire options.
func (o Opts) acquireOptions() []lease.AcquireOption {
	var opts []lease.AcquireOption
	if o.Holder != "" {
		opts = append(opts, lease.WithHolder(o.Holder))
	}
	if o.KeepAlive {
		opts = append(opts, lease.WithKeepAlive(0))
	}
	return opts
}

// Run runs every test of the suite as a subtest. It starts the servers it
// needs (redis-server must be on PATH): one set shared by the tests that
// leave servers alone, and sets of their own for the tests that freeze or
// kill them.
func Run(t *testing.T, h Harness) {
	requireHarness(t, h)
	s := newServers(t, h)
	t.Run("Deadlines", func(t *testing.T) { deadlines(t, h, s) })
	t.Run("ClosedPort", func(t *testing.T) { closedPort(t, h) })
	t.Run("ReleaseTwice", func(t *testing.T) { releaseTwice(t, h, s) })
	t.Run("ReleaseLost", func(t *testing.T) { releaseLost(t, h, s) })
	t.Run("Loss", func(t *testing.T) { loss(t, h, s) })
	t.Run("KeepAlive", func(t *testing.T) { keepAlive(t, h, s) })
	t.Run("Reacquire", func(t *testing.T) { reacquire(t, h, s) })
	t.Run("Reissue", func(t *testing.T) { reissue(t, h, s) })
	t.Run("NilInput", func(t *testing.T) { nilInput(t, h, s) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, h, s) })
	t.Run("Order", func(t *testing.T) { order(t, h, s, 4, 20) })
}

func requireHarness(t *testing.T, h Harness) {
	t.Helper()
	require.Positive(t, h.Servers, "Harness.Servers")
	require.NotNil(t, h.New, "Harness.New")
	require.NotNil(t, h.NilClient.TryAcquire, "Harness.NilClient.TryAcquire")
	require.NotNil(t, h.NilClient.Acquire, "Harness.NilClient.Acquire")
	if h.NilLease == nil { // a typed nil is what it must be
		t.Fatal("Harness.NilLease is an untyped nil: give a typed nil lease of the kind")
	}
	for _, s := range []struct {
		name      string
		got, want error
	}{
		{"NotAcquired", h.NotAcquired, lease.ErrNotAcquired},
		{"Lost", h.Lost, lease.ErrLost},
		{"Released", h.Released, lease.ErrReleased},
		{"Invalid", h.Invalid, lease.ErrInvalid},
	} {
		require.NotNil(t, s.got, "Harness.%s", s.name)
		require.ErrorIs(t, s.got, s.want, "Harness.%s must wrap the lease package's sentinel", s.name)
	}
}

// servers are the redis-servers of the suite, with the addresses a client of
// the kind runs on.
type servers struct {
	Redis []*testenv.Redis
	Addrs []string
}

// majority returns the servers the suite freezes or kills: a majority,
// the last len/2+1 (all of one).
func (s servers) majority() []*testenv.Redis { return s.Redis[len(s.Redis)/2:] }

// NewServers starts h.Servers redis-servers, closed when t ends.
func newServers(t testing.TB, h Harness) servers {
	t.Helper()
	rs := testenv.NewRedisN(t, h.Servers)
	s := servers{Redis: rs}
	for _, r := range rs {
		s.Addrs = append(s.Addrs, r.Addr())
	}
	return s
}

// Name returns a lock name unique to this test and call.
func lockName(t testing.TB) string {
	return strings.ReplaceAll(t.Name(), " ", "_") + "/" + randHex(4)
}

// Holder returns a fresh holder id.
func newHolder() string { return "leasetest-" + randHex(8) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ctxFor returns a context that ends with the test or after d.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// try takes name with c.TryAcquire and fails the test if it cannot.
func try(t testing.TB, c Client, name string, ttl time.Duration, o Opts) Lease {
	t.Helper()
	l, err := c.TryAcquire(ctxFor(t, 10*time.Second), name, ttl, o)
	require.NoError(t, err, "TryAcquire %q", name)
	require.NotNil(t, l, "TryAcquire %q returned no lease", name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = l.Release(ctx)
	})
	return l
}

// requireEnded asserts that l ended with an error wrapping want (and
// lease's sentinel of the same meaning): Done closed, Held false, Context
// cancelled with Err as its cause.
func requireEnded(t testing.TB, l Lease, want, leaseWant error) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is not closed")
	}
	err := l.Err()
	require.Error(t, err, "Err of an ended lease")
	assert.ErrorIs(t, err, want)
	assert.ErrorIs(t, err, leaseWant)
	assert.False(t, l.Held(), "Held of an ended lease")
	ctx := l.Context()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Context is not cancelled")
	}
	assert.Equal(t, err, context.Cause(ctx), "context.Cause(Context()) is Err()")
}

// requireLive asserts that l is held: Err nil, Done open, Held true.
func requireLive(t testing.TB, l Lease, what string) {
	t.Helper()
	require.NoError(t, l.Err(), what)
	assert.True(t, l.Held(), "%s: Held", what)
	select {
	case <-l.Done():
		t.Fatalf("%s: Done is closed", what)
	default:
	}
	assert.NoError(t, l.Context().Err(), "%s: Context", what)
}

// noPanic runs f and turns a panic into a test failure, so that one
// panicking method does not hide the others' results.
func noPanic(t testing.TB, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// errNotFreed is how waitFree reports a lock that stayed taken.
var errNotFreed = errors.New("still taken")

// waitFree tries name with c until it gets it (and releases it) or d
// passes.
func waitFree(t testing.TB, c Client, name string, d time.Duration) error {
	t.Helper()
	end := time.Now().Add(d)
	var last error
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		l, err := c.TryAcquire(ctx, name, time.Minute, Opts{})
		cancel()
		if err == nil {
			return l.Release(t.Context())
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%w after %v: %w", errNotFreed, d, last)
}

// waitDone waits for l's Done for at most d, and fails the test if it
// stays open.
func waitDone(t testing.TB, l Lease, d time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		t.Fatalf("Done did not close within %v (deadline %v)", d, l.Deadline())
	}
}
