package lease

import (
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/observe"
)

// Option configures a client of either kind: a [Client] of this package or
// a redlock.Client. The options here that are not marked otherwise mean the
// same for both; an option of one kind only (such as [WithFair] here, or
// redlock.WithNodeTimeout) given to the other kind's New makes it fail.
// Options check their arguments; New returns the first error, which wraps
// [ErrInvalid] (and the kind's own ErrInvalid).
type Option func(*family.Config) error

// Defaults of the options of both kinds.
const (
	// DefaultPrefix is prepended to every key and channel; see [WithPrefix].
	DefaultPrefix = family.DefaultPrefix
	// DefaultDriftFactor is the share of the ttl allowed for clock drift;
	// see [WithDriftFactor].
	DefaultDriftFactor = family.DefaultDriftFactor
	// DefaultMinBackoff and DefaultMaxBackoff bound the waits of a waiting
	// Acquire between tries; see [WithBackoff].
	DefaultMinBackoff = family.DefaultMinBackoff
	DefaultMaxBackoff = family.DefaultMaxBackoff
	// DefaultCounterTTL is how long a lock's counter lives after its last
	// write; see [WithCounterTTL].
	DefaultCounterTTL = family.DefaultCounterTTL
)

// WithFair sets whether locks are fair; for this package's [Client] only.
// Fair (the default): a waiting
// Acquire queues, and a release hands the lock, with a new token, straight
// to the longest-waiting live waiter, and wakes that one alone; TryAcquire
// does not jump the queue. Tokens then grow in handoff order and no waiter
// starves. Unfair: a release wakes one waiting Acquire per client, and the
// lock goes to whoever asks first, the releasing goroutine included; that
// saves the handoff's notification when one goroutine takes the lock again
// and again, at the price of starving the others.
//
// A fair waiter's ticket lives 2s without renewal (a waiter renews it with
// every try), so a waiter that died drops out within 2s. A release hands
// the lock over for those 2s only (the claim window; the ttl if shorter),
// and the new holder's lease, alive, extends it to its ttl in the
// background: so a lock handed to a waiter that died (an exit without
// Close, SIGKILL) is free again 2s after the release, whatever ttl that
// waiter asked for. A waiter that gives up takes its ticket with it (see
// [Client.Close]). All clients of one lock name must agree on this option.
func WithFair(on bool) Option {
	return family.Only(observe.KindLease, "WithFair", func(c *family.Config) error { c.Fair = on; return nil })
}

// WithPrefix sets the prefix of every Redis key and channel the client
// uses, on every node for redlock: the lock "job" lives in PREFIX{job}, its
// counter in PREFIX{job}:fence. It must not contain '{' or '}'. The default
// is [DefaultPrefix], "fencelock:".
func WithPrefix(p string) Option {
	return func(c *family.Config) error {
		if strings.ContainsAny(p, "{}") || len(p) > 128 {
			return c.Invalidf("prefix %q must be at most 128 bytes without braces", p)
		}
		c.Prefix = p
		return nil
	}
}

// WithDriftFactor sets the clock-drift allowance. A lease's local deadline
// is the start of the acquire (or refresh) plus ttl minus ttl*f + 2ms, so the
// holder stops trusting its lease a little before Redis lets it expire; a
// redlock lease is valid for ttl − elapsed − (ttl×f + 2ms). f must be in
// [0, 0.5). The default is [DefaultDriftFactor], 0.01.
func WithDriftFactor(f float64) Option {
	return func(c *family.Config) error {
		if err := lifetime.CheckDriftFactor(f); err != nil {
			return c.Invalidf("%w", err)
		}
		c.DriftFactor = f
		return nil
	}
}

// WithBackoff sets the bounds of the jittered exponential backoff a waiting
// Acquire uses between tries when no release message wakes it (lost
// message, or a lock that expires instead of being released): the n-th wait
// is drawn at random from [d/2, d] with d = min×2ⁿ capped at max; the
// randomness keeps competing clients apart. A waiter also wakes when the
// holder's remaining ttl runs out (for redlock: when the nodes' remaining
// ttls show a majority will be free). A fair waiter, which a release tells
// by message, tries every max instead (at most every 667ms, a third of its
// ticket's life). The defaults are [DefaultMinBackoff] and
// [DefaultMaxBackoff], 10ms and 1s.
func WithBackoff(min, max time.Duration) Option {
	return func(c *family.Config) error {
		if min <= 0 || max < min {
			return c.Invalidf("backoff bounds %v..%v", min, max)
		}
		c.MinBackoff, c.MaxBackoff = min, max
		return nil
	}
}

// WithClockFloor makes every acquire lift the lock's counter (on every
// node, for redlock) to the Redis server's clock (TIME, in microseconds)
// before incrementing it, so tokens keep growing even when the counter went
// backwards while it still exists (a failover to a replica that missed the
// last increments, a redlock node that restarted empty), as long as the
// serving Redis clock is not behind the old one. A missing counter starts
// from the clock anyway (see the counter rule in the package doc). Off by
// default.
func WithClockFloor(on bool) Option {
	return func(c *family.Config) error { c.ClockFloor = on; return nil }
}

// WithCounterTTL sets the ttl of counter keys (for redlock, the counters
// quorum fencing keeps on each node), refreshed on every write, so that
// many one-off lock names do not leave counters behind forever. A missing
// counter starts again from the server's clock, so tokens keep growing (see
// the counter rule in the package doc). Clients of one lock may use
// different values: the rule holds for any mix.
//
// The default is [DefaultCounterTTL], 1h. Zero keeps counters forever. The
// other keys of a lock never outlive it: the lock key is deleted on release
// or expires with the lease, and a fair lock's queue expires 2s after its
// last waiter.
func WithCounterTTL(d time.Duration) Option {
	return func(c *family.Config) error {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			return c.Invalidf("counter ttl %v", d)
		}
		c.CounterTTL = d
		return nil
	}
}

// WithReplicaAck makes every acquire wait, with WAIT on the same connection
// as the acquire script, until at least replicas replicas have the new lock
// and counter, for at most timeout; for this package's [Client] only. When
// fewer acknowledge in time the lock
// is released and the acquire fails with an error wrapping ErrNotReplicated,
// instead of handing out a token that a failover could hand out again.
// It costs a replication round trip per acquire. Off by default (replicas 0).
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return family.Only(observe.KindLease, "WithReplicaAck", func(c *family.Config) error {
		if replicas < 0 || (replicas > 0 && timeout < time.Millisecond) {
			return c.Invalidf("replica ack %d within %v", replicas, timeout)
		}
		c.Replicas, c.AckTimeout = replicas, timeout
		return nil
	})
}

// WithHooks reports the client's acquires and its leases' refreshes,
// losses and releases to h (see package observe; events carry the client's
// kind, observe.KindLease or observe.KindRedlock; the nested module
// extra/fenceotel makes OpenTelemetry metrics and spans of them). A nil h
// is invalid. The default is no hooks.
func WithHooks(h *observe.Hooks) Option {
	return func(c *family.Config) error {
		if h == nil {
			return c.Invalidf("nil hooks")
		}
		c.Hooks = h
		return nil
	}
}

// AcquireOption configures one acquisition, of either kind. Options check
// their arguments; the acquire returns the first error, which wraps
// [ErrInvalid] (and the kind's own ErrInvalid).
type AcquireOption func(*family.Acquire) error

// WithHolder acquires under a known holder id instead of a fresh random one.
// A process that saved its lease's Holder (and Token) can use it after a
// restart: if that holder still has the lock (for redlock: on a majority of
// the nodes), the lease is extended and the same token is returned instead
// of failing. The id must be 1..64 bytes of [A-Za-z0-9._-] and must be
// unique to one logical owner. The default is a fresh random id.
func WithHolder(id string) AcquireOption {
	return func(a *family.Acquire) error {
		if err := fence.ValidateHolder(id); err != nil {
			return a.Invalidf("%w", err)
		}
		a.Holder = id
		return nil
	}
}

// WithKeepAlive starts a goroutine that refreshes the lease every interval
// until it is released or lost. interval 0 means ttl/3 (at least 10ms). The
// interval must be at least 10ms and shorter than the lease's validity
// (ttl − drift), or the acquire fails with ErrInvalid before any I/O. Each
// refresh is bounded by the interval and the deadline, so a refresh stuck on
// a dead connection leaves time for another. A refresh that finds the lock
// gone (for redlock: from a majority) ends the lease: Done closes and Err
// says why. A refresh that fails with an I/O error is retried at the next
// tick; if none succeeds before the local deadline, the lease is lost. Off
// by default.
func WithKeepAlive(interval time.Duration) AcquireOption {
	return func(a *family.Acquire) error {
		if interval < 0 {
			return a.Invalidf("keep-alive interval %v is negative", interval)
		}
		a.KeepAlive, a.Interval = true, interval
		return nil
	}
}
