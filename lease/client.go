package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/script"
)

// Client hands out leases on one Redis deployment: a standalone server, a
// Sentinel-managed primary or a Redis Cluster (every key of one lock shares a
// hash slot). It is safe for concurrent use.
type Client struct {
	rdb redis.UniversalClient
	cfg config
}

// New returns a Client that uses rdb. The client is not closed by
// fencelock; close it yourself when done.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Client{rdb: rdb, cfg: cfg}, nil
}

// TryAcquire tries once to take lock name for ttl. When another holder has
// it, the error wraps ErrNotAcquired (and is a *HeldError telling for how
// much longer).
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	req, err := c.newRequest(name, ttl, opts)
	if err != nil {
		return nil, err
	}
	l, res, err := c.try(ctx, req)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, &HeldError{Name: name, Remaining: res.PTTL}
	}
	return l, nil
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
	if ttl < time.Millisecond {
		return request{}, fmt.Errorf("%w: ttl %v is below 1ms", ErrInvalid, ttl)
	}
	var ac acquireConfig
	for _, o := range opts {
		if err := o(&ac); err != nil {
			return request{}, err
		}
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
		},
	}, nil
}

// try runs the acquire script once. It returns a lease when acquired, a nil
// lease and the script's result when the lock is held, or an error.
func (c *Client) try(ctx context.Context, req request) (*Lease, script.AcquireResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, script.AcquireResult{}, fmt.Errorf("%w: %q: %w", ErrNotAcquired, req.name, err)
	}
	start := time.Now()
	res, err := c.acquire(ctx, req)
	if err != nil {
		if replyMayBeLost(err) {
			c.releaseAfterLostReply(ctx, req)
		}
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = errors.Join(err, ctxErr)
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
	if err != nil || !res.Acquired || acked >= int64(c.cfg.replicas) {
		return res, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, relErr := script.Release(rctx, c.rdb, req.keys, req.args.Holder)
	return script.AcquireResult{}, errors.Join(&notReplicatedError{
		name: req.name, seq: res.Seq, acked: acked, want: c.cfg.replicas, timeout: c.cfg.ackTimeout,
	}, relErr)
}

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

// replyMayBeLost reports whether err leaves open that the script ran on the
// server: anything but an error reply from Redis itself (a timeout, a
// cancelled context, a broken connection).
func replyMayBeLost(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr)
}

// releaseAfterLostReply deletes the lock if the lost acquire took it. It is
// best effort: the caller's context may be over, so it gets a short context
// of its own; if it fails too, the lock expires after its ttl.
func (c *Client) releaseAfterLostReply(ctx context.Context, req request) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, _ = script.Release(rctx, c.rdb, req.keys, req.args.Holder)
}

const releaseTimeout = time.Second

// drift is the clock-drift allowance for a ttl.
func (c *Client) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.cfg.driftFactor) + 2*time.Millisecond
}
