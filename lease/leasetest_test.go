package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/leasetest"
)

// TestLeasetest runs the lease conformance kit on the single-Redis lease.
func TestLeasetest(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, leasetest.Harness{
		Servers: 1,
		New: func(t testing.TB, addrs []string) leasetest.Client {
			c, err := lease.New(testenv.CtxClient(t, addrs[0], 1))
			require.NoError(t, err)
			return kitClient(c)
		},
		NilClient:   kitClient(nil),
		NilLease:    (*lease.Lease)(nil),
		NotAcquired: lease.ErrNotAcquired,
		Lost:        lease.ErrLost,
		Released:    lease.ErrReleased,
		Invalid:     lease.ErrInvalid,
	})
}

// kitClient adapts c to the kit, turning its options into the lease's.
func kitClient(c *lease.Client) leasetest.Client {
	opts := func(o leasetest.Opts) []lease.AcquireOption {
		var opts []lease.AcquireOption
		if o.Holder != "" {
			opts = append(opts, lease.WithHolder(o.Holder))
		}
		if o.KeepAlive {
			opts = append(opts, lease.WithKeepAlive(0))
		}
		return opts
	}
	return leasetest.Client{
		TryAcquire: func(ctx context.Context, name string, ttl time.Duration, o leasetest.Opts) (lease.Interface, error) {
			return c.TryAcquire(ctx, name, ttl, opts(o)...)
		},
		Acquire: func(ctx context.Context, name string, ttl time.Duration, o leasetest.Opts) (lease.Interface, error) {
			return c.Acquire(ctx, name, ttl, opts(o)...)
		},
	}
}
