package leasetest

// The kit must be able to fail: each test here runs one of its tests, in a
// child process, on the single-Redis lease broken in the way that test is
// there to catch, and expects it to fail.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// breakEnv names the breakage a child process runs.
const breakEnv = "LEASETEST_BROKEN"

// breakages are the ways to break the lease, each with the kit test that
// must catch it.
var breakages = map[string]func(t *testing.T, h Harness, s servers){
	// Calls wait for their own 3s timeout instead of the caller's deadline.
	"own-timeout": func(t *testing.T, h Harness, s servers) { deadlines(t, h, s) },
	// A refused connection is retried until the context ends.
	"retry-refused": func(t *testing.T, h Harness, _ servers) { closedPort(t, h) },
	// The second release returns the lease's Err.
	"release-twice": releaseTwice,
	// The release of a lost lease returns nil.
	"release-lost": releaseLost,
	// Done never closes.
	"done-open": loss,
	// The keep-alive option is dropped.
	"no-keepalive": keepAlive,
	// The holder option is dropped.
	"no-holder": reacquire,
	// Reissue returns the old token.
	"reissue-noop": reissue,
	// The nil lease panics.
	"nil-panics": nilInput,
	// A ttl of zero or less is taken for a default one.
	"default-ttl": badInput,
	// Each client locks a name of its own.
	"own-name": func(t *testing.T, h Harness, s servers) { order(t, h, s, 3, 5) },
}

// TestKitCatchesBrokenKinds runs each breakage in a child process and
// expects the kit test for it to fail.
func TestKitCatchesBrokenKinds(t *testing.T) {
	if os.Getenv(breakEnv) != "" {
		t.Skip("in a child process")
	}
	for name := range breakages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenKind$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), breakEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the kit passed a lease broken by %s (err %v):\n%s", name, err, out)
			assert.Contains(t, string(out), "--- FAIL: TestBrokenKind/", "the kit test failed, not the process:\n%s", out)
			assert.NotContains(t, string(out), "panic: ", "the kit reported a failure, not a crash:\n%s", out)
		})
	}
}

// TestBrokenKind runs, in a child process, the breakage named by breakEnv.
func TestBrokenKind(t *testing.T) {
	b := os.Getenv(breakEnv)
	if b == "" {
		t.Skip("run by TestKitCatchesBrokenKinds")
	}
	h := harness(b)
	s := newServers(t, h)
	t.Run(b, func(t *testing.T) { breakages[b](t, h, s) })
}

func harness(b string) Harness {
	var nilLease Lease = (*lease.Lease)(nil)
	if b == "nil-panics" {
		nilLease = (*brokenLease)(nil)
	}
	return Harness{
		Servers: 1,
		New: func(t testing.TB, addrs []string) Client {
			c, err := lease.New(testenv.CtxClient(t, addrs[0], 1))
			require.NoError(t, err)
			return broken(c, b)
		},
		NilClient:   broken(nil, b),
		NilLease:    nilLease,
		NotAcquired: lease.ErrNotAcquired,
		Lost:        lease.ErrLost,
		Released:    lease.ErrReleased,
		Invalid:     lease.ErrInvalid,
	}
}

// broken adapts c to the kit, broken as b says.
func broken(c *lease.Client, b string) Client {
	own := fmt.Sprintf("%p", c) // a name suffix of this client's
	acquire := func(f func(*lease.Client, context.Context, string, time.Duration, ...lease.AcquireOption) (*lease.Lease, error)) func(context.Context, string, time.Duration, Opts) (Lease, error) {
		return func(ctx context.Context, name string, ttl time.Duration, o Opts) (Lease, error) {
			var opts []lease.AcquireOption
			if o.Holder != "" && b != "no-holder" {
				opts = append(opts, lease.WithHolder(o.Holder))
			}
			if o.KeepAlive && b != "no-keepalive" {
				opts = append(opts, lease.WithKeepAlive(0))
			}
			switch b {
			case "default-ttl":
				if ttl <= 0 {
					ttl = time.Second
				}
			case "own-name":
				name += "/" + own
			case "own-timeout":
				var cancel context.CancelFunc
				ctx, cancel = ownTimeout(ctx)
				defer cancel()
			case "retry-refused":
				for {
					l, err := f(c, ctx, name, ttl, opts...)
					if err == nil || ctx == nil || ctx.Err() != nil || errors.Is(err, lease.ErrInvalid) {
						return wrap(l, err, b)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			l, err := f(c, ctx, name, ttl, opts...)
			return wrap(l, err, b)
		}
	}
	return Client{TryAcquire: acquire((*lease.Client).TryAcquire), Acquire: acquire((*lease.Client).Acquire)}
}

// wrap returns l broken as b says (a nil l as it is).
func wrap(l *lease.Lease, err error, b string) (Lease, error) {
	if l == nil {
		return l, err
	}
	return &brokenLease{Lease: l, b: b}, err
}

// brokenLease is a lease broken as b says. Its methods dereference it, so
// a nil one panics.
type brokenLease struct {
	Lease
	b string
}

func (l *brokenLease) Release(ctx context.Context) error {
	switch l.b {
	case "release-twice":
		if err := l.Lease.Err(); err != nil {
			return err
		}
	case "release-lost":
		if err := l.Lease.Release(ctx); !errors.Is(err, lease.ErrLost) {
			return err
		}
		return nil
	case "own-timeout":
		ctx, cancel := ownTimeout(ctx)
		defer cancel()
		return l.Lease.Release(ctx)
	}
	return l.Lease.Release(ctx)
}

func (l *brokenLease) Refresh(ctx context.Context, ttl time.Duration) error {
	if l.b == "own-timeout" {
		ctx, cancel := ownTimeout(ctx)
		defer cancel()
		return l.Lease.Refresh(ctx, ttl)
	}
	return l.Lease.Refresh(ctx, ttl)
}

func (l *brokenLease) Reissue(ctx context.Context, floor uint64) (fence.Token, error) {
	if l.b == "reissue-noop" {
		return l.Lease.Token(), nil
	}
	return l.Lease.Reissue(ctx, floor)
}

func (l *brokenLease) Done() <-chan struct{} {
	if l.b == "done-open" {
		return nil
	}
	return l.Lease.Done()
}

func (l *brokenLease) Err() error         { return l.Lease.Err() }
func (l *brokenLease) Held() bool         { return l.Lease.Held() }
func (l *brokenLease) Token() fence.Token { return l.Lease.Token() }

// ownTimeout replaces ctx's deadline with a 3s timeout of its own.
func ownTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
}
