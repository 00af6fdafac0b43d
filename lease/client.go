package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/script"
	"github.com/fencelock/fencelock/observe"
)

// Client hands out leases on one Redis deployment: a standalone server, a
// Sentinel-managed primary or a Redis Cluster (every key of one lock shares a
// hash slot). It is safe for concurrent use.
//
// A Client's waiting Acquire calls share one pub/sub connection, opened when
// the first of them waits and closed a second after the last one is done,
// so a thousand waiters cost one connection, not a thousand. On a Redis
// Cluster with sharded pub/sub (Redis 7 and later) they use SSUBSCRIBE
// instead, with one connection per master that serves a waited-for lock.
type Client struct {
	rdb    redis.UniversalClient
	cfg    config
	notify *notify.Notifier
}

// New returns a Client that uses rdb. It rejects a nil rdb (a typed nil
// such as a nil *redis.Client too), a nil option and bad option values with
// an error wrapping ErrInvalid, and does no I/O. The client is not closed by
// fencelock; close it yourself when done.
//
// Give rdb ContextTimeoutEnabled: true. Every call of this package honours
// its context, but go-redis applies a context's deadline to socket reads
// only with that option: without it, a call to a frozen server (SIGSTOP, a
// partition that drops packets) waits for the client's ReadTimeout (3s by
// default) and its retries (3 by default), whatever the context says. New
// accepts such a client, because a refusal would break the commonest
// client setup for a cost that only shows on a frozen server; the README's
// setup shows the options to use.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if isnil.Nil(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	cfg := defaultConfig()
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option #%d is nil", ErrInvalid, i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Client{rdb: rdb, cfg: cfg, notify: notify.New(rdb)}, nil
}

// TryAcquire tries once to take lock name for ttl. When another holder has
// it, the error wraps ErrNotAcquired (and is a *HeldError telling for how
// much longer).
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return c.observed(ctx, name, ttl, false, func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		req, err := c.newRequest(name, ttl, opts)
		if err != nil {
			return nil, err
		}
		p.Attempts++
		l, res, err := c.try(ctx, req)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, &HeldError{Name: name, Remaining: res.PTTL}
		}
		return l, nil
	})
}

// observed runs an acquire and reports it to the client's hooks.
func (c *Client) observed(ctx context.Context, name string, ttl time.Duration, waiting bool,
	run func(context.Context, *emit.Progress) (*Lease, error),
) (*Lease, error) {
	var h *observe.Hooks
	if c != nil {
		h = c.cfg.hooks
	}
	e := observe.AcquireStart{Kind: observe.KindLease, Name: name, TTL: ttl, Waiting: waiting}
	return emit.Acquire(h, ctx, e, ErrNotAcquired, run)
}

// HeldError is returned by TryAcquire when another holder has the lock. It
// wraps ErrNotAcquired.
type HeldError struct {
	Name      string
	Remaining time.Duration // the holder's remaining ttl; <= 0 when unknown
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease: not acquired: %q is held by another holder for %v", e.Name, e.Remaining)
}

// Unwrap returns ErrNotAcquired.
func (e *HeldError) Unwrap() error { return ErrNotAcquired }

// request is one validated acquisition.
type request struct {
	name string
	keys script.Keys
	ttl  time.Duration
	args script.AcquireArgs
	opt  acquireConfig
}

func (c *Client) newRequest(name string, ttl time.Duration, opts []AcquireOption) (request, error) {
	if c == nil || c.rdb == nil {
		return request{}, fmt.Errorf("%w: nil client", ErrInvalid)
	}
	if err := fence.ValidateKey(name); err != nil {
		return request{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := lifetime.CheckTTL(ttl, c.cfg.driftFactor); err != nil {
		return request{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var ac acquireConfig
	for i, o := range opts {
		if o == nil {
			return request{}, fmt.Errorf("%w: acquire option #%d is nil", ErrInvalid, i)
		}
		if err := o(&ac); err != nil {
			return request{}, err
		}
	}
	if ac.keepAlive {
		every, err := lifetime.KeepAliveEvery(ttl, ac.interval, c.cfg.driftFactor)
		if err != nil {
			return request{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		ac.interval = every
	}
	reacquire := ac.holder != ""
	if !reacquire {
		ac.holder = uuid.NewString()
	}
	return request{
		name: name,
		keys: script.KeysFor(c.cfg.prefix, name),
		ttl:  ttl,
		opt:  ac,
		args: script.AcquireArgs{
			Holder:     ac.holder,
			TTL:        ttl,
			ClockFloor: c.cfg.clockFloor,
			CounterTTL: c.cfg.counterTTL,
			Reacquire:  reacquire,
			Fair:       c.cfg.fair,
			TicketTTL:  ticketTTL,
		},
	}, nil
}

// try runs the acquire script once. It returns a lease when acquired, a nil
// lease and the script's result when the lock is held, or an error.
func (c *Client) try(ctx context.Context, req request) (*Lease, script.AcquireResult, error) {
	if ctx == nil {
		return nil, script.AcquireResult{}, fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if lifetime.Ended(ctx) != nil {
		return nil, script.AcquireResult{}, notAcquired(ctx, req.name, nil)
	}
	start := time.Now()
	res, err := c.acquire(ctx, req)
	if err != nil {
		// After a refused connection or an error reply the script did not
		// run; c.acquire released what it knows it took (ErrNotReplicated,
		// a failed WAIT); and a re-acquire must not delete a lock its
		// holder may have had before the call.
		if script.MayHaveRun(err) && !errors.Is(err, errReleased) && !req.args.Reacquire {
			c.releaseAfterLostReply(ctx, req)
		}
		if lifetime.Ended(ctx) != nil {
			return nil, res, notAcquired(ctx, req.name, err)
		}
		return nil, res, fmt.Errorf("lease: acquire %q: %w", req.name, err)
	}
	if !res.Acquired {
		return nil, res, nil
	}
	tok := fence.Token{Key: req.name, Seq: res.Seq, Holder: req.args.Holder}
	return newLease(c, req, tok, start), res, nil
}

// acquire runs the acquire script, followed by WAIT when replica
// acknowledgement is on.
func (c *Client) acquire(ctx context.Context, req request) (script.AcquireResult, error) {
	if c.cfg.replicas == 0 {
		return script.Acquire(ctx, c.rdb, req.keys, req.args)
	}
	var node script.Pipeliner = c.rdb
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		// WAIT has no key: send it down the connection of the lock's master.
		n, err := cc.MasterForKey(ctx, req.keys.Lock)
		if err != nil {
			return script.AcquireResult{}, err
		}
		node = n
	}
	res, acked, err := script.AcquireAcked(ctx, node, req.keys, req.args, c.cfg.replicas, c.cfg.ackTimeout)
	if err != nil && res.Acquired { // the script took the lock, WAIT failed
		return script.AcquireResult{}, errors.Join(err, errReleased, c.releaseAfterLostReply(ctx, req))
	}
	if err != nil || !res.Acquired || acked >= int64(c.cfg.replicas) {
		return res, err
	}
	relErr := c.releaseAfterLostReply(ctx, req)
	return script.AcquireResult{}, errors.Join(&notReplicatedError{
		name: req.name, seq: res.Seq, acked: acked, want: c.cfg.replicas, timeout: c.cfg.ackTimeout,
	}, errReleased, relErr)
}

// errReleased marks an acquire error after which the lock was already
// released, so try does not release it again.
var errReleased = errors.New("the lock was released again")

// notReplicatedError wraps ErrNotReplicated with the figures.
type notReplicatedError struct {
	name    string
	seq     uint64
	acked   int64
	want    int
	timeout time.Duration
}

func (e *notReplicatedError) Error() string {
	return fmt.Sprintf("%v: %q seq %d: %d of %d replicas acknowledged within %v; released",
		ErrNotReplicated, e.name, e.seq, e.acked, e.want, e.timeout)
}

func (e *notReplicatedError) Unwrap() error { return ErrNotReplicated }

// notAcquired is the error of an acquire whose context ended: it wraps
// ErrNotAcquired, ctx.Err() and the I/O error cause, if any (a refused
// connection says more than the deadline that followed it).
func notAcquired(ctx context.Context, name string, cause error) error {
	ctxErr := lifetime.Ended(ctx)
	if cause == nil || errors.Is(cause, ctxErr) {
		return fmt.Errorf("%w: %q: %w", ErrNotAcquired, name, ctxErr)
	}
	return fmt.Errorf("%w: %q: %w: %w", ErrNotAcquired, name, ctxErr, cause)
}

// releaseAfterLostReply deletes the lock if the failed acquire took it
// (not after a re-acquire: its holder may have had the lock before). It
// is best effort: each try is bounded by releaseTimeout, and failed tries
// are retried for as long as the ttl (1s to 30s), because a paused server
// runs the lost acquire only when it resumes. When ctx ends first it goes on
// in the background, so the caller returns at its deadline. If it fails for
// good, the lock expires after its ttl.
func (c *Client) releaseAfterLostReply(ctx context.Context, req request) error {
	return lifetime.Detach(ctx, releaseTimeout, lifetime.CleanupBound(req.ttl), func(ctx context.Context) error {
		_, err := script.Leave(ctx, c.rdb, req.keys, req.args.Holder, req.args)
		return err
	})
}

// releaseTimeout bounds one try of a best-effort release after a failed
// acquire.
const releaseTimeout = time.Second
