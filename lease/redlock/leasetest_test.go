package redlock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
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
		NilLease:    (*redlock.Lease)(nil),
		NotAcquired: redlock.ErrNotAcquired,
		Lost:        redlock.ErrLost,
		Released:    redlock.ErrReleased,
		Invalid:     redlock.ErrInvalid,
	})
}

// kitClient adapts c to the kit.
func kitClient(c *redlock.Client) leasetest.Client {
	return leasetest.ClientOf(c.TryAcquire, c.Acquire)
}
