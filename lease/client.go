package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/transport"
	"github.com/fencelock/fencelock/observe"
)

// Client hands out leases, on one Redis deployment ([New]: a standalone
// server, a Sentinel-managed primary or a Redis Cluster) or on a quorum of
// independent masters (redlock.New). Both kinds are this one type, with the
// same methods and the same [Lease]. It is safe for concurrent use.
//
// A Client's waiting Acquire calls share one pub/sub connection (per node),
// opened when the first of them waits and closed a second after the last
// one is done.
type Client struct {
	s       family.Strategy
	cfg     family.Config
	pending lifetime.Pending // background cleanups, which Close waits for
	closed  atomic.Bool
}

// New returns a Client that takes locks on rdb. It rejects a nil rdb (a
// typed nil too), a nil option and bad option values with an error
// wrapping ErrInvalid, and does no I/O. fencelock adds nothing to rdb and
// never closes it: every command goes through rdb's own methods, so its
// hooks see them.
//
// Give rdb ContextTimeoutEnabled: true: go-redis applies a context's
// deadline to socket reads only with it; without it a call to a frozen
// server waits for the client's ReadTimeout and retries (about 5s with the
// defaults), whatever the context says. go-redis also retries a refused
// dial (MaxRetries, DialerRetries): a server that is down is reported once
// those retries end (about 2.7s with the defaults) or the context does.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	return newClient(func(cfg *family.Config) (family.Strategy, error) {
		if isnil.Nil(rdb) {
			return nil, invalid("nil redis client")
		}
		return quorum.New(quorum.Config{Shared: cfg, Kind: observe.KindLease, Name: "lease",
			Nodes: []*quorum.Node{quorum.NewNode("", rdb)}, OneRedis: cfg.OneRedis})
	}, opts)
}

// newClient is the client of every kind: lease's defaults, opts applied in
// order, and the strategy newStrategy makes of them.
func newClient[O any](newStrategy func(*family.Config) (family.Strategy, error), opts []O) (*Client, error) {
	cfg := family.New(DefaultPrefix, DefaultDriftFactor, DefaultMinBackoff, DefaultMaxBackoff, DefaultCounterTTL)
	cfg.Invalid, cfg.NotAcquired, cfg.Lost, cfg.NotReplicated = ErrInvalid, ErrNotAcquired, ErrLost, ErrNotReplicated
	cfg.OneRedis.Fair = true // the default of WithFair
	if err := family.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	s, err := newStrategy(&cfg)
	if err != nil {
		return nil, err
	}
	return &Client{s: s, cfg: cfg}, nil
}

func init() {
	family.NewClient = func(newStrategy func(*family.Config) (family.Strategy, error), opts ...any) (any, error) {
		c, err := newClient(newStrategy, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Close waits, until ctx ends, for the client's background cleanups (a
// waiter that gave up leaving the fair queue, the release of a lock a lost
// reply may have taken, a release that got no answer), so that a process that exits right after leaves
// no lock behind. It returns by ctx's deadline whatever the state of Redis:
// cleanups still running then are abandoned (their locks expire with their
// ttl) and the error says how many, wrapping ctx.Err(). Afterwards Acquire
// and TryAcquire fail with ErrInvalid; leases already held keep working.
// Close does not close the Redis clients. Closing twice is fine.
func (c *Client) Close(ctx context.Context) error {
	if c == nil || c.s == nil || ctx == nil {
		return invalid("nil client or context")
	}
	c.closed.Store(true)
	defer c.s.Close(ctx) // the transport's senders, once the cleanups that use them are done
	if err := c.pending.Wait(ctx); err != nil {
		return fmt.Errorf("lease: close: %d background cleanups abandoned; their locks expire with their ttl: %w",
			c.pending.Count(), err)
	}
	return nil
}

// TryAcquire tries once to take lock name for ttl. When another holder has
// it, the error wraps ErrNotAcquired: on one Redis it is a *HeldError
// telling for how much longer; on a quorum it joins the nodes' errors.
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return c.tryAcquire(ctx, name, nil, ttl, opts)
}

// tryAcquire is TryAcquire of a lock, or of a permit of the semaphore sem
// (not nil) on name.
func (c *Client) tryAcquire(ctx context.Context, name string, sem *protocol.Semaphore, ttl time.Duration, opts []AcquireOption) (*Lease, error) {
	var p emit.Progress
	return emit.Observed(c.hooks(), c.kind(), ctx, name, ttl, false, ErrNotAcquired, &p, func(ctx context.Context) (*Lease, error) {
		a, ac, err := c.begin(ctx, name, sem, ttl, false, opts)
		if err != nil {
			return nil, err
		}
		for {
			p.Attempts++
			g, m, err := a.Try(ctx)
			switch {
			case g != nil:
				if l := c.newLease(g, ttl, ac.Interval); l.Held() {
					return l, nil
				}
				continue // the reply came after the deadline: take it again
			case lifetime.Ended(ctx) != nil:
				return nil, notAcquired(ctx, name, err)
			case err != nil:
				return nil, err
			}
			return nil, &HeldError{Name: name, Remaining: m.Remaining, Queued: m.Queued, Permits: permits(sem)}
		}
	})
}

// Acquire takes lock name for ttl, waiting while another holder has it.
//
// The first try costs one round trip. If the lock is held, the waiter
// listens for releases through the client's shared pub/sub connection and
// tries again when a release wakes it, when the holder's remaining ttl
// runs out, or after a jittered backoff (see [WithBackoff]). On a fair lock
// (see [WithFair]) a release hands the lock, with a new token, straight to
// the longest-waiting live waiter, which returns without another round
// trip. A waiter that gives up leaves the queue.
//
// When ctx ends first the error wraps both ErrNotAcquired and ctx.Err(),
// and a lock the last try may have taken is released in the background. An
// error of the lock service (one Redis failing, or a majority of nodes) is
// returned as soon as the Redis client reports it; on a quorum, nodes that
// only time out are retried, for at most a ttl.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return c.acquire(ctx, name, nil, ttl, opts)
}

// acquire is Acquire of a lock, or of a permit of the semaphore sem (not
// nil) on name.
func (c *Client) acquire(ctx context.Context, name string, sem *protocol.Semaphore, ttl time.Duration, opts []AcquireOption) (*Lease, error) {
	var p emit.Progress
	return emit.Observed(c.hooks(), c.kind(), ctx, name, ttl, true, ErrNotAcquired, &p, func(ctx context.Context) (*Lease, error) {
		a, ac, err := c.begin(ctx, name, sem, ttl, true, opts)
		if err != nil {
			return nil, err
		}
		l, err := c.wait(ctx, a, name, ttl, ac.Interval, &p)
		if err != nil {
			a.Abandon(ctx)
		}
		return l, err
	})
}

// wait is the one wait loop of every kind.
func (c *Client) wait(ctx context.Context, a family.Attempt, name string, ttl, keepAlive time.Duration, p *emit.Progress) (*Lease, error) {
	// On a lock this client already listens to, join before the first try
	// (no I/O): a release after that try cannot be missed. Otherwise the
	// first try goes alone, so an uncontended Acquire costs one round trip
	// and no subscription; if it misses, listen, and try again at once to
	// catch a release in between.
	w := a.Joined()
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	backoff := c.cfg.Backoff()
	var failing time.Time // the start of tries that all failed a majority
	for waits := 0; ; {
		if w != nil {
			w.BeforeTry()
		}
		p.Attempts++
		begun := time.Now()
		g, m, err := a.Try(ctx)
		if g != nil {
			if w != nil {
				w.Got()
			}
			if l := c.newLease(g, ttl, keepAlive); l.Held() {
				return l, nil
			}
			continue // read after its deadline: the next try finds out
		}
		p.Handoff = false
		switch {
		case lifetime.Ended(ctx) != nil:
			return nil, notAcquired(ctx, name, err)
		case m.Unavailable:
			return nil, err
		case !m.NoMajority:
			failing = time.Time{}
		case failing.IsZero():
			failing = begun
		case time.Since(failing) >= ttl:
			return nil, joinErr(fmt.Errorf("%w: %q: every try for %v (the ttl) failed a majority of the nodes: the lock service is unavailable",
				ErrNotAcquired, name, time.Since(failing).Round(time.Millisecond)), err)
		}
		if w == nil {
			w = a.Listen(ctx)
			continue
		}
		wait := backoff.Wait(waits)
		if m.Poll > 0 {
			wait = m.Poll
		}
		if m.Remaining > 0 && m.Remaining+time.Millisecond < wait {
			wait = m.Remaining + time.Millisecond // expires without a release
		}
		waits++
		g, woken, werr := w.Wait(ctx, wait, m)
		if werr != nil {
			return nil, notAcquired(ctx, name, err)
		}
		// A wake-up that lost the race is not reset: the backoff goes
		// on growing, and the next release wakes a waiter anyway.
		p.Handoff = woken
		if g != nil {
			if l := c.newLease(g, ttl, keepAlive); l.Held() {
				return l, nil
			}
		}
	}
}

// begin validates an acquisition before any I/O and starts it.
func (c *Client) begin(ctx context.Context, name string, sem *protocol.Semaphore, ttl time.Duration, waiting bool, opts []AcquireOption) (family.Attempt, family.Acquire, error) {
	switch {
	case c == nil || c.s == nil:
		return nil, family.Acquire{}, invalid("nil client")
	case ctx == nil:
		return nil, family.Acquire{}, invalid("nil context")
	case c.closed.Load():
		return nil, family.Acquire{}, invalid("the client is closed")
	}
	if err := fence.ValidateKey(name); err != nil {
		return nil, family.Acquire{}, invalid("%w", err)
	}
	if of, slot, ok := protocol.ParsePermitName(name); ok && sem == nil {
		// A lease of a slot must come through its semaphore, which queues
		// it with the semaphore's waiters and reads the slot's N.
		return nil, family.Acquire{}, invalid("%q names slot %d of semaphore %q: take a permit of it (Client.Semaphore(%q, n); fencelock run --permits n %s)", name, slot, of, of, of)
	}
	if err := lifetime.CheckTTL(ttl, c.cfg.DriftFactor); err != nil {
		return nil, family.Acquire{}, invalid("%w", err)
	}
	ac, err := family.ApplyAcquire(&c.cfg, ttl, opts)
	if err != nil {
		return nil, ac, err
	}
	if ac.Holder != "" {
		// A cleanup still running may be under the same holder id: it
		// would delete the lock this re-acquire is about to get back.
		if err := c.pending.Wait(ctx); err != nil {
			return nil, ac, notAcquired(ctx, name, nil)
		}
	}
	return c.s.Begin(family.Request{Name: name, TTL: ttl, Holder: ac.Holder, Waiting: waiting, Pending: &c.pending,
		Semaphore: sem}), ac, nil
}

// newLease starts the lifetime of what a try obtained.
func (c *Client) newLease(g *family.Grant, ttl, keepAlive time.Duration) *Lease {
	cfg := lifetime.Config{Lost: ErrLost, Released: ErrReleased, Invalid: ErrInvalid,
		DriftFactor: c.cfg.DriftFactor, TTL: ttl, KeepAlive: keepAlive,
		Hooks: c.cfg.Hooks, Kind: c.s.Kind(), Pending: &c.pending}
	l := new(Lease)
	if g.Claim > 0 && g.Claim < ttl {
		l.life.BeginClaim(g.Backend, g.Token, g.Start, g.Claim, cfg)
	} else {
		l.life.Begin(g.Backend, g.Token, g.Start, ttl, cfg)
	}
	return l
}

// permits is sem's N; 0 for a lock (nil).
func permits(sem *protocol.Semaphore) int {
	if sem == nil {
		return 0
	}
	return sem.N
}

// hooks returns the client's hooks; nil for a nil client.
func (c *Client) hooks() *observe.Hooks {
	if c == nil {
		return nil
	}
	return c.cfg.Hooks
}

// kind names the client's kind in events.
func (c *Client) kind() observe.Kind {
	if c == nil || c.s == nil {
		return observe.KindLease
	}
	return c.s.Kind()
}

// notAcquired is the error of an acquire whose context ended: it wraps
// ErrNotAcquired, ctx.Err() and the last try's error, if any.
func notAcquired(ctx context.Context, name string, cause error) error {
	ctxErr := lifetime.Ended(ctx)
	var dial *transport.DialError
	if errors.As(cause, &dial) && errors.Is(cause, ctxErr) && !errors.Is(cause, ErrNotAcquired) {
		return fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, cause) // "ctx err (last dial to ...)"
	}
	if cause == nil || errors.Is(cause, ctxErr) && !errors.Is(cause, ErrNotAcquired) {
		return fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, ctxErr)
	}
	if errors.Is(cause, ErrNotAcquired) {
		return joinErr(cause, ctxErr)
	}
	return fmt.Errorf("%w: %q: %w: %w", ErrNotAcquired, name, ctxErr, cause)
}
