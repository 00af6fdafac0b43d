package redlock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/leasetest"
	"github.com/fencelock/fencelock/lease/redlock"
)

// TestLeasetest runs the lease conformance kit on Redlock over three
// masters, with quorum fencing for its tokens.
func TestLeasetest(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, leasetest.Harness{
		Servers: 3,
		New: func(t testing.TB, addrs []string) leasetest.Client {
			rdbs := make([]redis.UniversalClient, len(addrs))
			for i, a := range addrs {
				rdbs[i] = testenv.CtxClient(t, a, 1)
			}
			return kitClient(newLocker(t, rdbs, redlock.WithQuorumFencing(true)))
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
