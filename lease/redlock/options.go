package redlock

import "time"

// Option configures [New]: this package's options, and lease's
// SharedOptions (lease.WithPrefix, lease.WithDriftFactor, lease.WithBackoff,
// lease.WithClockFloor, lease.WithCounterTTL, lease.WithHooks). Options of
// a client on one Redis (lease.WithFair, lease.WithReplicaAck) are not
// Options, and the compiler says so.
type Option interface{ RedlockOption() }

// option is an option of this package: it sets the quorum's settings.
type option func(*settings) error

func (option) RedlockOption() {}

// settings are a quorum's own settings.
type settings struct {
	nodeTimeout   time.Duration
	anyNodeCount  bool
	quorumFencing bool
	wakeup        bool
	invalid       func(format string, args ...any) error
}

// DefaultNodeTimeout is the least the default node timeout bounds each
// node's reply by; see [WithNodeTimeout].
const DefaultNodeTimeout = 50 * time.Millisecond

// WithNodeTimeout bounds how long an operation waits for each node; a node
// that has not answered by then counts as failed (its [NodeError] wraps
// [ErrNodeTimeout]). The default is a tenth of the lock's ttl, at least
// [DefaultNodeTimeout] (50ms; Inspect and Advance use 50ms), and a try or
// refresh that a majority granted then waits at most 50ms more for the
// rest: a burst of waiters queues each node's calls behind each other's,
// and a release that times out costs the lock's waiters its ttl.
func WithNodeTimeout(d time.Duration) Option {
	return option(func(s *settings) error {
		if d < time.Millisecond {
			return s.invalid("node timeout %v is below 1ms", d)
		}
		s.nodeTimeout = d
		return nil
	})
}

// WithQuorumFencing turns quorum fencing on or off (see the package doc).
// On, a lease's token Seq is the highest counter among the granting nodes,
// written back to a majority before the lease is returned. Off, no counter
// is kept: the acquire is a plain SET NX PX on each node, the token's Seq is
// 0 (no verifier accepts it) and Reissue is refused. The default is off.
func WithQuorumFencing(on bool) Option {
	return option(func(s *settings) error { s.quorumFencing = on; return nil })
}

// WithForceNodeCount lets [New] accept an even number of nodes, or fewer
// than three, which tolerate no more failures than one node fewer. The
// default is to refuse them.
func WithForceNodeCount() Option {
	return option(func(s *settings) error { s.anyNodeCount = true; return nil })
}

// WithWakeup sets whether a waiting Acquire listens to the lock's release
// channel on every node and tries again as soon as a node that had refused
// it publishes a release (after a random delay of up to 2ms, so that the
// woken waiters of several clients do not split the votes). Off, a waiter
// relies on the backoff and the nodes' remaining ttls. The default is on.
func WithWakeup(on bool) Option {
	return option(func(s *settings) error { s.wakeup = on; return nil })
}
