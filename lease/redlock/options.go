package redlock

import (
	"time"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

// DefaultNodeTimeout bounds each node's reply; see [WithNodeTimeout]. The
// defaults of the options both kinds share are package lease's
// (lease.DefaultPrefix, lease.DefaultDriftFactor, ...).
const DefaultNodeTimeout = 50 * time.Millisecond

// The options below configure a redlock [Client] only; [New] takes them
// with the options of package lease that both kinds share (lease.WithPrefix,
// lease.WithDriftFactor, lease.WithBackoff, lease.WithClockFloor,
// lease.WithCounterTTL, lease.WithHooks). Given to lease.New, they make it
// fail with lease.ErrInvalid.

// WithNodeTimeout bounds how long an operation waits for each node. A node
// that has not answered by then counts as failed (its [NodeError] wraps
// [ErrNodeTimeout]) and the operation goes on with the others, so one slow
// or paused node costs at most d. Keep it small next to the ttl: the time
// spent waiting is taken from the lease's validity. The default is 50ms.
//
// Set up the redis clients for this: ContextTimeoutEnabled: true, so that a
// call abandoned at the timeout also ends then (otherwise it holds a pool
// connection until the client's ReadTimeout); and MaxRetries: -1 and
// DialerRetries: 1, because go-redis's own retries (by default 3 command
// retries and 5 dials 100ms apart) only spend the node timeout, while
// redlock's next attempt retries anyway.
func WithNodeTimeout(d time.Duration) lease.Option {
	return family.Only(observe.KindRedlock, "WithNodeTimeout", func(c *family.Config) error {
		if d < time.Millisecond {
			return c.Invalidf("node timeout %v is below 1ms", d)
		}
		c.NodeTimeout = d
		return nil
	})
}

// WithQuorumFencing turns quorum fencing on or off. On, a new lease's token
// Seq is the highest counter among the nodes that granted the lock, and
// before the lease is returned that Seq is written back (atomic max) to every
// node that answered and must have reached a majority, else the acquire
// fails. Tokens of non-overlapping acquisitions then increase as long as the
// nodes that took the write-back and have not restarted since form a
// majority: any minority of nodes may restart empty between two
// acquisitions. The write-back is a second round trip, but only to nodes
// whose counter was behind; in the steady state all counters agree and it
// costs nothing. Off, no counter is kept at all: the acquire is a plain SET
// NX PX on each node, the token's Seq is 0 (no verifier accepts it) and
// [Lease.Reissue] is refused. The default is off.
func WithQuorumFencing(on bool) lease.Option {
	return family.Only(observe.KindRedlock, "WithQuorumFencing", func(c *family.Config) error { c.QuorumFencing = on; return nil })
}

// WithForceNodeCount lets [New] accept an even number of nodes, or fewer
// than three. A majority of an even N is N/2+1, so N nodes tolerate no more
// failures than N−1; one or two nodes tolerate none. The default is to
// reject such counts with [ErrInvalid].
func WithForceNodeCount() lease.Option {
	return family.Only(observe.KindRedlock, "WithForceNodeCount", func(c *family.Config) error { c.AnyNodeCount = true; return nil })
}

// WithWakeup controls whether a waiting [Client.Acquire], once it found the
// lock busy, listens to the lock's release channel on every node and tries
// again as soon as a node that had refused it publishes a release (after a
// random delay of up to the minimum backoff, capped at 2ms, so that the woken
// waiters of several clients do not all collide and split the votes). The
// client's waiters share one pub/sub connection per node, and a release
// wakes one of them per node, not all. Off, a waiter relies on the backoff
// and the remaining ttls alone. The default is on.
func WithWakeup(on bool) lease.Option {
	return family.Only(observe.KindRedlock, "WithWakeup", func(c *family.Config) error { c.Wakeup = on; return nil })
}
