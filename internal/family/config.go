// Package family holds what the lease kinds (package lease, one Redis, and
// package lease/redlock, a quorum of masters) share: the one configuration
// their options fill, the acquire configuration, and the backoff of their
// waits. Package lease defines the option types over these and the options
// that mean the same for both kinds; each kind's own options check, with
// [Only], that they configure the kind they belong to.
package family

import (
	"time"

	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/observe"
)

// Defaults of the shared options; package lease exports them.
const (
	DefaultPrefix      = "fencelock:"
	DefaultDriftFactor = 0.01
	DefaultMinBackoff  = 10 * time.Millisecond
	DefaultMaxBackoff  = time.Second
	DefaultCounterTTL  = time.Hour
)

// Config is the configuration of a client of either kind.
type Config struct {
	// Kind is the kind of client configured.
	Kind observe.Kind
	// Invalid is the kind's ErrInvalid, which option errors wrap.
	Invalid error

	// Shared by both kinds.
	Prefix                 string
	DriftFactor            float64
	MinBackoff, MaxBackoff time.Duration
	ClockFloor             bool
	CounterTTL             time.Duration
	Hooks                  *observe.Hooks

	// Lease only.
	Fair       bool
	Replicas   int           // replica acknowledgement: 0 is off
	AckTimeout time.Duration // how long WAIT may block

	// Redlock only.
	NodeTimeout   time.Duration
	AnyNodeCount  bool
	QuorumFencing bool
	Wakeup        bool
}

// New returns the configuration of a client of kind with the shared
// defaults; the kind sets its own. invalid is the kind's ErrInvalid.
func New(kind observe.Kind, invalid error) Config {
	return Config{
		Kind:        kind,
		Invalid:     invalid,
		Prefix:      DefaultPrefix,
		DriftFactor: DefaultDriftFactor,
		MinBackoff:  DefaultMinBackoff,
		MaxBackoff:  DefaultMaxBackoff,
		CounterTTL:  DefaultCounterTTL,
	}
}

// Option is what both kinds' option types are.
type Option interface{ ~func(*Config) error }

// Apply applies opts in order and returns the first error: a nil option is
// invalid.
func Apply[O Option](c *Config, opts []O) error {
	for i, o := range opts {
		if o == nil {
			return c.Invalidf("option #%d is nil", i)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// Invalidf returns an error wrapping the kind's ErrInvalid.
func (c *Config) Invalidf(format string, args ...any) error {
	return sentinel.Wrapf(c.Invalid, format, args...)
}

// Only returns an option, named name, that configures a client of kind
// with set, and refuses the configuration of another kind.
func Only(kind observe.Kind, name string, set func(*Config) error) func(*Config) error {
	return func(c *Config) error {
		if c.Kind != kind {
			return c.Invalidf("%s configures a %s client, not a %s client", name, kind, c.Kind)
		}
		return set(c)
	}
}

// Acquire is the configuration of one acquisition, of either kind.
type Acquire struct {
	// Invalid is the kind's ErrInvalid, which option errors wrap.
	Invalid   error
	Holder    string
	KeepAlive bool
	Interval  time.Duration // keep-alive period; 0 means ttl/3 until resolved
}

// Invalidf returns an error wrapping the kind's ErrInvalid.
func (a *Acquire) Invalidf(format string, args ...any) error {
	return sentinel.Wrapf(a.Invalid, format, args...)
}

// AcquireOption is what both kinds' acquire option types are.
type AcquireOption interface{ ~func(*Acquire) error }

// ApplyAcquire returns the configuration of an acquisition for ttl by a
// client configured by c: opts applied in order (a nil one is invalid), and
// the keep-alive period resolved and checked against the ttl.
func ApplyAcquire[O AcquireOption](c *Config, ttl time.Duration, opts []O) (Acquire, error) {
	if len(opts) == 0 {
		// Without options a stays on the stack (an option's call takes
		// its address), and there is nothing to resolve: no keep-alive.
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
