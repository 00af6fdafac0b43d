package lease_test

import (
	"testing"

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

// kitClient adapts c to the kit.
func kitClient(c *lease.Client) leasetest.Client {
	return leasetest.ClientOf(c)
}
