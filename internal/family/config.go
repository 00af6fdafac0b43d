// Package family holds what the lease kinds (one Redis, in package lease,
// and a quorum of masters, in package lease/redlock) share above the one
// backend of package quorum: the client's configuration and its options
// (config.go), the seam between lease's wait loop and the backend
// (strategy.go), and the backoff of waits (backoff.go).
package family

import (
	"time"

	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/observe"
)

// Config is the configuration of a client: the settings both kinds read,
// and (OneRedis) those only a client on one Redis has, which only package
// lease's options set; the compiler keeps them from redlock.New.
type Config struct {
	// Invalid, NotAcquired, Lost and NotReplicated are package lease's
	// sentinels, which the errors of every kind wrap.
	Invalid, NotAcquired, Lost, NotReplicated error

	Prefix                 string
	DriftFactor            float64
	MinBackoff, MaxBackoff time.Duration
	ClockFloor             bool
	CounterTTL             time.Duration
	Hooks                  *observe.Hooks

	OneRedis OneRedis
}

// NewClient is package lease's one constructor of a *lease.Client (as an
// any) of every kind: the client's configuration, lease's defaults with
// opts applied, and its strategy, which newStrategy makes of it. Package
// lease sets it as it is initialised, once, and never again (lease cannot
// be imported from here, and lease/redlock imports lease); redlock.New
// calls it, so no mode of lease.New makes a quorum.
var NewClient func(newStrategy func(*Config) (Strategy, error), opts ...any) (any, error)

// OneRedis holds what only a lock on exactly one Redis can do.
type OneRedis struct {
	Fair       bool          // fair handoff through the queue
	Replicas   int           // replica acknowledgement: 0 is off
	AckTimeout time.Duration // how long WAIT may block
}

// New returns a configuration with the shared settings given (package
// lease's documented defaults).
func New(prefix string, driftFactor float64, minBackoff, maxBackoff, counterTTL time.Duration) Config {
	return Config{
		Prefix:      prefix,
		DriftFactor: driftFactor,
		MinBackoff:  minBackoff,
		MaxBackoff:  maxBackoff,
		CounterTTL:  counterTTL,
	}
}

// Setter is what every option value of this module is underneath: the
// option types of package lease and lease/redlock only say, to the
// compiler, which constructors take them.
type Setter interface{ Set(*Config) error }

// Set is a Setter from a func.
type Set func(*Config) error

// Set calls f.
func (f Set) Set(c *Config) error { return f(c) }

// Apply applies opts in order and returns the first error: a nil option,
// or one that is not a Setter of this module, is invalid.
func Apply[O any](c *Config, opts []O) error {
	for i, o := range opts {
		s, ok := any(o).(Setter)
		if !ok || s == nil {
			return c.Invalidf("option #%d is nil or not one of fencelock's", i)
		}
		if err := s.Set(c); err != nil {
			return err
		}
	}
	return nil
}

// Invalidf returns an error wrapping ErrInvalid.
func (c *Config) Invalidf(format string, args ...any) error {
	return sentinel.Wrapf(c.Invalid, format, args...)
}

// Acquire is the configuration of one acquisition.
type Acquire struct {
	Invalid   error
	Holder    string
	KeepAlive bool
	Interval  time.Duration // keep-alive period; 0 means ttl/3 until resolved
}

// Invalidf returns an error wrapping ErrInvalid.
func (a *Acquire) Invalidf(format string, args ...any) error {
	return sentinel.Wrapf(a.Invalid, format, args...)
}

// AcquireOption is what the acquire option type is.
type AcquireOption interface{ ~func(*Acquire) error }

// ApplyAcquire returns the configuration of an acquisition for ttl by a
// client configured by c: opts applied in order (a nil one is invalid), and
// the keep-alive period resolved and checked against the ttl.
func ApplyAcquire[O AcquireOption](c *Config, ttl time.Duration, opts []O) (Acquire, error) {
	if len(opts) == 0 {
		return Acquire{Invalid: c.Invalid}, nil
	}
	a := Acquire{Invalid: c.Invalid}
	for i, o := range opts {
		if o == nil {
			return a, a.Invalidf("acquire option #%d is nil", i)
		}
		if err := o(&a); err != nil {
			return a, err
		}
	}
	if a.KeepAlive {
		every, err := lifetime.KeepAliveEvery(ttl, a.Interval, c.DriftFactor)
		if err != nil {
			return a, a.Invalidf("%w", err)
		}
		a.Interval = every
	}
	return a, nil
}

// Keys are lock name's keys under the client's prefix, for every kind.
func (c *Config) Keys(name string) protocol.Keys { return protocol.KeysFor(c.Prefix, name) }

// Semaphore are the keys of semaphore name of n permits under the
// client's prefix.
func (c *Config) Semaphore(name string, n int) protocol.Semaphore {
	return protocol.SemaphoreFor(c.Prefix, name, n)
}

// Counter is how the client keeps a lock's counter (on every node).
func (c *Config) Counter() protocol.Counter {
	return protocol.Counter{TTL: c.CounterTTL, ClockFloor: c.ClockFloor}
}
