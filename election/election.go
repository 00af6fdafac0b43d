package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// Election is one leader election: every process that campaigns on the same
// name and Redis competes for one lease. It is safe for concurrent use; one
// Election may campaign several times, one term at a time or not.
type Election struct {
	c    *lease.Client
	name string
	ttl  time.Duration
	cfg  config
}

type config struct {
	keepAlive time.Duration
	poll      time.Duration
}

// Option configures an Election.
type Option func(*config) error

// WithKeepAlive sets how often a leader refreshes its lease. The default, 0,
// is ttl/3 (see lease.WithKeepAlive for the rules).
func WithKeepAlive(interval time.Duration) Option {
	return func(c *config) error {
		if interval < 0 {
			return invalid("keep-alive interval %v is negative", interval)
		}
		c.keepAlive = interval
		return nil
	}
}

// WithPoll sets how often Observe reads who leads. The default is 250ms.
func WithPoll(interval time.Duration) Option {
	return func(c *config) error {
		if interval < time.Millisecond {
			return invalid("poll interval %v is below 1ms", interval)
		}
		c.poll = interval
		return nil
	}
}

// DefaultPoll is Observe's poll interval unless WithPoll says otherwise.
const DefaultPoll = 250 * time.Millisecond

// New returns the election name on the locks of c. ttl is the leader's
// lease: a leader that dies without resigning keeps the others waiting for
// at most ttl. The lock's name is name; do not take it with another lease.
func New(c *lease.Client, name string, ttl time.Duration, opts ...Option) (*Election, error) {
	if c == nil {
		return nil, invalid("nil lease client")
	}
	if err := fence.ValidateKey(name); err != nil {
		return nil, invalid("%w", err)
	}
	if ttl < time.Millisecond {
		return nil, invalid("ttl %v is below 1ms", ttl)
	}
	cfg := config{poll: DefaultPoll}
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Election{c: c, name: name, ttl: ttl, cfg: cfg}, nil
}

// Name returns the election's lock name.
func (e *Election) Name() string { return e.name }

// Campaign blocks until this process leads, and returns its term; or until
// ctx ends, and returns an error wrapping lease.ErrNotAcquired and ctx's
// error. Each term has a fresh holder id and a token above every earlier
// term's.
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	if e == nil {
		return nil, invalid("nil election")
	}
	if ctx == nil {
		return nil, invalid("nil context")
	}
	l, err := e.c.Acquire(ctx, e.name, e.ttl, lease.WithKeepAlive(e.cfg.keepAlive))
	if err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return nil, fmt.Errorf("election: campaign %q: %w", e.name, err)
	}
	return &Term{e: e, l: l}, nil
}

// Leader returns the current leader's term token (its Holder says who
// leads), or an error wrapping ErrNoLeader when nobody leads. It is a
// snapshot: the answer may be stale when it arrives; only a verifier can
// refuse a deposed leader's writes.
func (e *Election) Leader(ctx context.Context) (fence.Token, error) {
	if e == nil {
		return fence.Token{}, invalid("nil election")
	}
	info, err := e.c.Inspect(ctx, e.name)
	if err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return fence.Token{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return fence.Token{}, fmt.Errorf("election: leader of %q: %w", e.name, err)
	}
	if info.Holder == "" {
		return fence.Token{}, fmt.Errorf("%w: %q", ErrNoLeader, e.name)
	}
	return info.Token, nil
}
