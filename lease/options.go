package lease

import (
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/observe"
)

// Option configures [New], a client on one Redis. [SharedOption]s are
// Options too; redlock's own options are not, and the compiler says so.
type Option interface{ LeaseOption() }

// SharedOption configures a client of either kind: [New] and redlock.New
// both take it.
type SharedOption interface {
	Option
	RedlockOption()
}

// option is a lease-only option; shared is an option of both kinds.
type (
	option struct{ set family.Set }
	shared struct{ set family.Set }
)

func (o option) Set(c *family.Config) error { return o.set(c) }
func (o shared) Set(c *family.Config) error { return o.set(c) }
func (option) LeaseOption()                 {}
func (shared) LeaseOption()                 {}
func (shared) RedlockOption()               {}

// Defaults of the options.
const (
	// DefaultPrefix is prepended to every key and channel; see [WithPrefix].
	DefaultPrefix = "fencelock:"
	// DefaultDriftFactor is the share of the ttl allowed for clock drift;
	// see [WithDriftFactor].
	DefaultDriftFactor = 0.01
	// DefaultMinBackoff and DefaultMaxBackoff bound a waiting Acquire's
	// waits between tries; see [WithBackoff].
	DefaultMinBackoff = 10 * time.Millisecond
	DefaultMaxBackoff = time.Second
	// DefaultCounterTTL is how long a lock's counter lives after its last
	// write; see [WithCounterTTL].
	DefaultCounterTTL = time.Hour
)

// WithFair sets whether locks are fair. Fair (the default): a waiting
// Acquire queues, and a release hands the lock, with a new token, straight
// to the longest-waiting live waiter; TryAcquire does not jump the queue.
// Tokens then grow in handoff order and no waiter starves. Unfair: a
// release wakes one waiting Acquire per client and the lock goes to
// whoever asks first. All clients of one lock name must agree.
//
// A release hands a fair lock over for a claim window of 2s (the ttl if
// shorter), which the new holder's lease, alive, extends to its ttl in the
// background: a lock handed to a waiter that died (an exit without Close,
// SIGKILL) is free again 2s after the release, whatever ttl it asked for.
func WithFair(on bool) Option {
	return option{func(c *family.Config) error { c.OneRedis.Fair = on; return nil }}
}

// WithReplicaAck makes every acquire wait, with WAIT on the acquire's
// connection, until replicas replicas have the new lock and counter, for at
// most timeout; when fewer acknowledge, the lock is released and the error
// wraps [ErrNotReplicated]. Off by default (replicas 0).
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return option{func(c *family.Config) error {
		if replicas < 0 || (replicas > 0 && timeout < time.Millisecond) {
			return c.Invalidf("replica ack %d within %v", replicas, timeout)
		}
		c.OneRedis.Replicas, c.OneRedis.AckTimeout = replicas, timeout
		return nil
	}}
}

// WithPrefix sets the prefix of every key and channel: the lock "job" lives
// in PREFIX{job}, its counter in PREFIX{job}:fence. At most 128 bytes, no
// braces. The default is [DefaultPrefix], "fencelock:".
func WithPrefix(p string) SharedOption {
	return shared{func(c *family.Config) error {
		if strings.ContainsAny(p, "{}") || len(p) > 128 {
			return c.Invalidf("prefix %q must be at most 128 bytes without braces", p)
		}
		c.Prefix = p
		return nil
	}}
}

// WithDriftFactor sets the clock-drift allowance f, in [0, 0.5): a lease's
// local deadline is the start of its acquire (or refresh) + ttl − (ttl×f +
// 2ms). The default is [DefaultDriftFactor], 0.01.
func WithDriftFactor(f float64) SharedOption {
	return shared{func(c *family.Config) error {
		if err := lifetime.CheckDriftFactor(f); err != nil {
			return c.Invalidf("%w", err)
		}
		c.DriftFactor = f
		return nil
	}}
}

// WithBackoff bounds the jittered exponential backoff of a waiting Acquire
// that nothing woke: the n-th wait is drawn from [d/2, d], d = min×2ⁿ
// capped at max. A fair waiter polls every max instead (at most every
// 667ms). The defaults are [DefaultMinBackoff] and [DefaultMaxBackoff],
// 10ms and 1s.
func WithBackoff(min, max time.Duration) SharedOption {
	return shared{func(c *family.Config) error {
		if min <= 0 || max < min {
			return c.Invalidf("backoff bounds %v..%v", min, max)
		}
		c.MinBackoff, c.MaxBackoff = min, max
		return nil
	}}
}

// WithClockFloor makes every acquire lift the counter (on every node) to
// the Redis server's clock in microseconds before incrementing it, so that
// tokens keep growing after a counter went backwards while it exists (see
// the counter rule in the package doc). Off by default.
func WithClockFloor(on bool) SharedOption {
	return shared{func(c *family.Config) error { c.ClockFloor = on; return nil }}
}

// WithCounterTTL sets the ttl of counter keys, refreshed on every write, so
// that one-off lock names do not leave counters behind forever; a missing
// counter starts again from the server's clock. Zero keeps counters
// forever. The default is [DefaultCounterTTL], 1h.
func WithCounterTTL(d time.Duration) SharedOption {
	return shared{func(c *family.Config) error {
		if d < 0 || (d > 0 && d < time.Millisecond) {
			return c.Invalidf("counter ttl %v", d)
		}
		c.CounterTTL = d
		return nil
	}}
}

// WithHooks reports acquires, refreshes, losses and releases to h (see
// package observe; extra/fenceotel turns them into OpenTelemetry). A nil h
// is invalid. The default is no hooks.
func WithHooks(h *observe.Hooks) SharedOption {
	return shared{func(c *family.Config) error {
		if h == nil {
			return c.Invalidf("nil hooks")
		}
		c.Hooks = h
		return nil
	}}
}

// AcquireOption configures one acquisition, of either kind.
type AcquireOption func(*acquireConfig) error

// acquireConfig hides family.Acquire from go doc.
type acquireConfig = family.Acquire

// WithHolder acquires under a known holder id instead of a fresh random
// one: a process that saved its lease's token can take the lock back after
// a restart, with the same token, if that holder still has it. The id must
// pass fence.ValidateHolder (up to 64 bytes of letters, digits and
// "._-+/=", so redsync's and redislock's values fit). The default is a
// fresh id.
func WithHolder(id string) AcquireOption {
	return func(a *acquireConfig) error {
		if err := fence.ValidateHolder(id); err != nil {
			return a.Invalidf("%w", err)
		}
		a.Holder = id
		return nil
	}
}

// WithKeepAlive refreshes the lease every interval until it is released or
// lost; 0 means ttl/3. The interval must be at least 10ms and shorter than
// the lease's validity. A refresh that finds the lock gone ends the lease;
// one that fails is retried at the next tick. Off by default.
func WithKeepAlive(interval time.Duration) AcquireOption {
	return func(a *acquireConfig) error {
		if interval < 0 {
			return a.Invalidf("keep-alive interval %v is negative", interval)
		}
		a.KeepAlive, a.Interval = true, interval
		return nil
	}
}
