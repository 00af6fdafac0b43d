package redlock

import (
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/observe"
)

// Defaults of the options.
const (
	// DefaultPrefix is prepended to every key; the same as the lease's, so
	// a lock name means the same keys on every node.
	DefaultPrefix = "fencelock:"
	// DefaultDriftFactor is the share of the ttl allowed for clock drift
	// between the nodes and this process.
	DefaultDriftFactor = 0.01
	// DefaultNodeTimeout bounds each node's reply; see [WithNodeTimeout].
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultMinBackoff and DefaultMaxBackoff bound the waits between the
	// attempts of [Client.Acquire]; see [WithBackoff].
	DefaultMinBackoff = 10 * time.Millisecond
	DefaultMaxBackoff = time.Second
	// DefaultCounterTTL is how long a lock's counter lives on a node after
	// its last write, as for the lease; see [WithCounterTTL].
	DefaultCounterTTL = time.Hour
)

// Option configures a [Client]. Options check their arguments; [New]
// returns the first error, which wraps [ErrInvalid].
type Option func(*config) error

type config struct {
	prefix                 string
	driftFactor            float64
	nodeTimeout            time.Duration
	anyNodeCount           bool
	quorumFencing          bool
	clockFloor             bool
	counterTTL             time.Duration
	minBackoff, maxBackoff time.Duration
	wakeup                 bool
	hooks                  *observe.Hooks
}

func defaultConfig() config {
	return config{
		prefix:      DefaultPrefix,
		driftFactor: DefaultDriftFactor,
		nodeTimeout: DefaultNodeTimeout,
		minBackoff:  DefaultMinBackoff,
		maxBackoff:  DefaultMaxBackoff,
		counterTTL:  DefaultCounterTTL,
		wakeup:      true,
	}
}

// WithPrefix sets the prefix of every key and channel: the lock "job" lives
// in PREFIX{job} on every node, its counter in PREFIX{job}:fence. It must not
// contain '{' or '}'. The default is "fencelock:", as for the lease.
func WithPrefix(p string) Option {
	return func(c *config) error {
		if strings.ContainsAny(p, "{}") || len(p) > 128 {
			return invalid("prefix %q must be at most 128 bytes without braces", p)
		}
		c.prefix = p
		return nil
	}
}

// WithDriftFactor sets the clock drift allowance as a share of the ttl: a
// lease is valid for ttl − elapsed − (ttl×f + 2ms). f must be in [0, 0.5).
// The default is 0.01.
func WithDriftFactor(f float64) Option {
	return func(c *config) error {
		if err := lifetime.CheckDriftFactor(f); err != nil {
			return invalid("%w", err)
		}
		c.driftFactor = f
		return nil
	}
}

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
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return invalid("node timeout %v is below 1ms", d)
		}
		c.nodeTimeout = d
		return nil
	}
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
func WithQuorumFencing(on bool) Option {
	return func(c *config) error { c.quorumFencing = on; return nil }
}

// WithClockFloor makes every node lift the lock's counter to its own Redis
// TIME in microseconds before incrementing it, as the lease's option of the
// same name does, so that a node that restarted empty does not hand out
// small Seqs (as long as its clock is not behind). The default is off.
func WithClockFloor(on bool) Option {
	return func(c *config) error { c.clockFloor = on; return nil }
}

// WithCounterTTL sets the ttl of the counters quorum fencing keeps on each
// node, so that one-off lock names do not leave counters behind forever.
// Every node follows the lease's counter rule (see package lease): a
// missing counter starts again at the node's clock in microseconds, and a
// counter above the clock lives until the clock has passed it, so a
// counter that expired never yields a Seq below one it issued. Zero keeps
// counters forever. The default is [DefaultCounterTTL] (1h).
func WithCounterTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			return invalid("counter ttl %v", d)
		}
		c.counterTTL = d
		return nil
	}
}

// WithForceNodeCount lets [New] accept an even number of nodes, or fewer
// than three. A majority of an even N is N/2+1, so N nodes tolerate no more
// failures than N−1; one or two nodes tolerate none. The default is to
// reject such counts with [ErrInvalid].
func WithForceNodeCount() Option {
	return func(c *config) error { c.anyNodeCount = true; return nil }
}

// WithBackoff bounds the waits of [Client.Acquire] between attempts when no
// release wakes it: the n-th wait is drawn at random from [d/2, d] with
// d = min×2ⁿ capped at max, and is cut short when the nodes' remaining ttls
// show a majority will be free sooner. The randomness keeps competing
// clients from splitting the votes again and again. The defaults are 10ms
// and 1s, as for the lease.
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) error {
		if min <= 0 || max < min {
			return invalid("backoff bounds %v..%v", min, max)
		}
		c.minBackoff, c.maxBackoff = min, max
		return nil
	}
}

// WithWakeup controls whether a waiting [Client.Acquire], once it found the
// lock busy, listens to the lock's release channel on every node and tries
// again as soon as a node that had refused it publishes a release (after a
// random delay of up to the minimum backoff, capped at 2ms, so that the woken
// waiters of several clients do not all collide and split the votes). The
// client's waiters share one pub/sub connection per node, and a release
// wakes one of them per node, not all. Off, a waiter relies on the backoff
// and the remaining ttls alone. The default is on.
func WithWakeup(on bool) Option {
	return func(c *config) error { c.wakeup = on; return nil }
}

// WithHooks reports the client's acquires and its leases' refreshes,
// losses and releases to h, as the lease's option of the same name does
// (events carry observe.KindRedlock). A nil h is invalid. The default is no
// hooks.
func WithHooks(h *observe.Hooks) Option {
	return func(c *config) error {
		if h == nil {
			return invalid("nil hooks")
		}
		c.hooks = h
		return nil
	}
}

// AcquireOption configures one acquisition. Options check their arguments;
// the acquire returns the first error, which wraps [ErrInvalid].
type AcquireOption func(*acquireConfig) error

type acquireConfig struct {
	holder    string
	keepAlive bool
	interval  time.Duration // keep-alive period; resolved by acquireOptions (0: off)
}

// WithKeepAlive starts a goroutine that refreshes the lease every interval
// until it is released or lost. interval 0 means ttl/3 (at least 10ms). The
// interval must be at least 10ms and shorter than the lease's validity
// (ttl − drift), or the acquire fails with [ErrInvalid] before any I/O; the
// rule is the single-node lease's. Each refresh is bounded by the interval
// and by the deadline. A refresh that finds the lease gone from a majority
// ends it: Done closes and Err says why. A refresh that fails for want of
// answers (node errors, timeouts) is retried at the next tick; if none
// succeeds before the local deadline, the lease is lost. Off by default.
func WithKeepAlive(interval time.Duration) AcquireOption {
	return func(a *acquireConfig) error {
		if interval < 0 {
			return invalid("keep-alive interval %v is negative", interval)
		}
		a.keepAlive, a.interval = true, interval
		return nil
	}
}

// WithHolder acquires under a known holder id instead of a fresh random one,
// as the lease's option of the same name does. A process that saved its
// lease's Holder can use it after a restart: if a majority of the nodes
// still hold the lock for that holder, their keys are extended and the same
// token is returned (a node that lost the key takes it again and, under
// quorum fencing, the token's Seq). The id must be 1..64 bytes of
// [A-Za-z0-9._-] and unique to one logical owner.
func WithHolder(id string) AcquireOption {
	return func(a *acquireConfig) error {
		if err := fence.ValidateHolder(id); err != nil {
			return invalid("%w", err)
		}
		a.holder = id
		return nil
	}
}

func (c *Client) acquireOptions(ttl time.Duration, opts []AcquireOption) (acquireConfig, error) {
	var a acquireConfig
	for i, o := range opts {
		if o == nil {
			return a, invalid("acquire option #%d is nil", i)
		}
		if err := o(&a); err != nil {
			return a, err
		}
	}
	if a.keepAlive {
		every, err := lifetime.KeepAliveEvery(ttl, a.interval, c.cfg.driftFactor)
		if err != nil {
			return a, invalid("%w", err)
		}
		a.interval = every
	}
	return a, nil
}
