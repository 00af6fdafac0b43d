package scaffold

import (
	"time"

	"github.com/fencelock/fencelock/observe"
)

// Config is what the options of every verifier set. Each package declares
// its own Option type over it (type Option func(*Config) error), so that an
// option of one verifier cannot be given to another.
type Config struct {
	// Hooks, if not nil, receive every verdict.
	Hooks *observe.Hooks
	// Table is the high-water table: a name, or schema and name (SQL
	// verifiers).
	Table []string
	// Ident checks one part of a table name, with the backend's rule; nil
	// accepts any. Set by the constructor before the options run.
	Ident func(part string) error
	// Prefix is the prefix of high-water keys (redisverifier).
	Prefix string
	// ClockBound, when positive, refuses tokens too far above the clock
	// (verifier.CheckClockBound).
	ClockBound time.Duration
}

// WithClockBound is the WithClockBound option of every verifier: a
// negative bound is invalid, 0 turns the bound off.
func (k *Kind) WithClockBound(bound time.Duration) func(*Config) error {
	return func(c *Config) error {
		if bound < 0 {
			return k.Invalidf("clock bound %v is negative", bound)
		}
		c.ClockBound = bound
		return nil
	}
}

// WithHooks is the WithHooks option of every verifier: a nil h is invalid.
func (k *Kind) WithHooks(h *observe.Hooks) func(*Config) error {
	return func(c *Config) error {
		if h == nil {
			return k.Invalidf("nil hooks")
		}
		c.Hooks = h
		return nil
	}
}

// WithTable is the WithTable option of the SQL verifiers: one or two parts,
// each accepted by c.Ident.
func (k *Kind) WithTable(parts ...string) func(*Config) error {
	return func(c *Config) error {
		if len(parts) == 0 || len(parts) > 2 {
			return k.Invalidf("table name has %d parts, want 1 or 2", len(parts))
		}
		for _, p := range parts {
			if c.Ident == nil {
				continue
			}
			if err := c.Ident(p); err != nil {
				return err
			}
		}
		c.Table = append([]string(nil), parts...)
		return nil
	}
}

// Apply runs opts on c in order and returns the first error: a nil option
// wraps ErrInvalid, an option's own error is returned as it is.
func Apply[O ~func(*Config) error](k *Kind, c *Config, opts []O) error {
	for i, o := range opts {
		if o == nil {
			return k.Invalidf("New: option %d is nil", i)
		}
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}
