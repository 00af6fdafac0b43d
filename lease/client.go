package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/batch"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/protocol"
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
	// rdb is batch, the caller's client with its script calls batched
	// (see New); raw is the caller's client itself.
	rdb     redis.UniversalClient
	raw     redis.UniversalClient
	batch   *batch.Client
	cfg     family.Config
	notify  *notify.Notifier
	dials   *family.Dials    // rdb's last failed dial, named by an acquire that timed out
	pending lifetime.Pending // background cleanups, which Close waits for
	closed  atomic.Bool
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
//
// The Client's script calls (acquire, refresh, release...) go out batched:
// the calls that its goroutines make at the same moment are sent together
// as one pipeline, at most two pipelines in flight at a time, and each
// call still returns at its own context's deadline. Under concurrency this
// is many times fewer round trips. A lone call (nothing else queued or in
// flight) is sent at once, directly, on the caller's goroutine. Batched
// calls pass through rdb's ProcessPipelineHook, lone ones through its
// ProcessHook. Other commands are sent directly. [Client.Close] stops the
// idle senders.
//
// New adds one hook to rdb (a [redis.Hook], once per *redis.Client however
// many Clients share it; on a Cluster or Ring client, to the nodes it creates
// afterwards). It hooks only dialing: it records the last failed dial, so
// that an acquire whose context ends while go-redis retries a refused
// connection names it (the error then also wraps syscall.ECONNREFUSED).
// Commands pass it untouched, but note that go-redis treats a client with
// any hook as hooked (its AutoPipeline, for one, then takes a slower path).
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if isnil.Nil(rdb) {
		return nil, invalid("nil redis client")
	}
	cfg := family.New(observe.KindLease, ErrInvalid)
	cfg.Fair = true
	if err := family.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	b := batch.New(rdb)
	return &Client{rdb: b, raw: rdb, batch: b, cfg: cfg, notify: notify.New(rdb), dials: family.DialsOf(rdb)}, nil
}

// Close waits, until ctx ends, for the client's background cleanups: a
// waiter that gave up leaving the fair queue (and passing on a lock handed
// to it meanwhile), a release after a lost reply. A process that exits
// right after an Acquire ended, as on a signal, calls it so that it does
// not leave its ticket behind, and the lock is not handed to a process that
// is gone. Afterwards Acquire and TryAcquire fail with ErrInvalid; leases
// already held keep working. Close does not close the Redis client, and
// its error is ctx's when cleanups were still running. Closing twice is
// fine. Close also ends the goroutines that send the batched script calls
// once they are idle; calls made afterwards (a held lease's release) still
// work.
func (c *Client) Close(ctx context.Context) error {
	if c == nil {
		return invalid("nil client")
	}
	if ctx == nil {
		return invalid("nil context")
	}
	c.closed.Store(true)
	err := c.pending.Wait(ctx)
	c.batch.Close()
	return err
}

// TryAcquire tries once to take lock name for ttl. When another holder has
// it, the error wraps ErrNotAcquired (and is a *HeldError telling for how
// much longer).
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	return emit.Observed(c.hooks(), observe.KindLease, ctx, name, ttl, false, ErrNotAcquired, c.named(func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		req, err := c.newRequest(ctx, name, ttl, opts)
		if err != nil {
			return nil, err
		}
		p.Attempts++
		l, res, err := c.try(ctx, req)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, &HeldError{Name: name, Remaining: res.PTTL, Queued: res.Outcome == protocol.Reserved}
		}
		return l, nil
	}))
}

// hooks returns the client's hooks; nil for a nil client.
func (c *Client) hooks() *observe.Hooks {
	if c == nil {
		return nil
	}
	return c.cfg.Hooks
}

// HeldError is returned by TryAcquire when another holder has the lock, or
// when a fair lock is free but reserved for the waiters queued ahead. It
// wraps ErrNotAcquired.
type HeldError struct {
	Name      string
	Remaining time.Duration // the holder's remaining ttl; <= 0 when unknown or Queued
	Queued    bool          // free, but reserved for fair waiters queued ahead
}

func (e *HeldError) Error() string {
	if e.Queued {
		return fmt.Sprintf("lease: not acquired: %q is reserved for the waiters queued ahead", e.Name)
	}
	return fmt.Sprintf("lease: not acquired: %q is held by another holder for %v", e.Name, e.Remaining)
}

// Unwrap returns ErrNotAcquired.
func (e *HeldError) Unwrap() error { return ErrNotAcquired }

// request is one validated acquisition.
type request struct {
	name      string
	keys      protocol.Keys
	ttl       time.Duration
	try       protocol.Try
	reacquire bool // WithHolder: the holder may have had the lock before the call
	opt       family.Acquire
}

func (c *Client) newRequest(ctx context.Context, name string, ttl time.Duration, opts []AcquireOption) (request, error) {
	if err := c.usable(ctx); err != nil {
		return request{}, err
	}
	if c.closed.Load() {
		return request{}, invalid("the client is closed")
	}
	if err := fence.ValidateKey(name); err != nil {
		return request{}, invalid("%w", err)
	}
	if err := lifetime.CheckTTL(ttl, c.cfg.DriftFactor); err != nil {
		return request{}, invalid("%w", err)
	}
	ac, err := family.ApplyAcquire(&c.cfg, ttl, opts)
	if err != nil {
		return request{}, err
	}
	reacquire := ac.Holder != ""
	if !reacquire {
		ac.Holder = uuid.NewString()
	} else if err := c.pending.Wait(ctx); err != nil {
		// A cleanup still running (a release that went to the background,
		// a leave) may be under the same holder id: it would delete the
		// lock this re-acquire is about to get back.
		return request{}, notAcquired(ctx, name, nil)
	}
	return request{
		name:      name,
		keys:      protocol.KeysFor(c.cfg.Prefix, name),
		ttl:       ttl,
		opt:       ac,
		reacquire: reacquire,
		try:       protocol.Try{Holder: ac.Holder, TTL: ttl, Counter: c.counter(), Fair: c.cfg.Fair},
	}, nil
}

// counter is how the client keeps counters.
func (c *Client) counter() protocol.Counter {
	return protocol.Counter{TTL: c.cfg.CounterTTL, ClockFloor: c.cfg.ClockFloor}
}

// release is how holder lets go of a lock of this client.
func (c *Client) release(holder string) protocol.Release {
	return protocol.Release{Holder: holder, Fair: c.cfg.Fair, Counter: c.counter(), PubSub: c.notify.PubSub()}
}

// try runs the acquire script once. It returns a lease when acquired, a nil
// lease and the script's result when the lock is held, or an error.
func (c *Client) try(ctx context.Context, req request) (*Lease, protocol.TryResult, error) {
	if lifetime.Ended(ctx) != nil {
		return nil, protocol.TryResult{}, notAcquired(ctx, req.name, nil)
	}
	start := time.Now()
	res, err := c.acquire(ctx, req)
	if err != nil {
		// After a refused connection or an error reply the script did not
		// run; c.acquire released what it knows it took (ErrNotReplicated,
		// a failed WAIT); and a re-acquire must not delete a lock its
		// holder may have had before the call.
		if protocol.MayHaveRun(err) && !errors.Is(err, errReleased) {
			c.releaseAfterLostReply(ctx, req, protocol.TryResult{})
		}
		if lifetime.Ended(ctx) != nil {
			return nil, res, notAcquired(ctx, req.name, err)
		}
		return nil, res, fmt.Errorf("lease: acquire %q: %w", req.name, err)
	}
	if !res.Got() {
		return nil, res, nil
	}
	if lifetime.Ended(ctx) != nil {
		// A client that does not honour deadlines let the reply in after
		// ctx ended: the caller has gone, so the lock must not stay taken.
		c.releaseAfterLostReply(ctx, req, res)
		return nil, protocol.TryResult{}, notAcquired(ctx, req.name, nil)
	}
	tok := fence.Token{Key: req.name, Seq: res.Seq, Holder: req.try.Holder}
	return newLease(c, req, tok, start), res, nil
}

// acquire runs the acquire script, followed by WAIT when replica
// acknowledgement is on.
func (c *Client) acquire(ctx context.Context, req request) (protocol.TryResult, error) {
	if c.cfg.Replicas == 0 {
		return protocol.Acquire(ctx, c.rdb, req.keys, req.try)
	}
	var node protocol.Pipeliner = c.raw
	if cc, ok := c.raw.(*redis.ClusterClient); ok {
		// WAIT has no key: send it down the connection of the lock's master.
		n, err := cc.MasterForKey(ctx, req.keys.Lock)
		if err != nil {
			return protocol.TryResult{}, err
		}
		node = n
	}
	res, acked, err := protocol.AcquireAcked(ctx, node, req.keys, req.try, c.cfg.Replicas, c.cfg.AckTimeout)
	if err != nil && res.Got() { // the script took the lock, WAIT failed
		return protocol.TryResult{}, errors.Join(err, errReleased, c.releaseAfterLostReply(ctx, req, res))
	}
	if err != nil || !res.Got() || acked >= int64(c.cfg.Replicas) {
		return res, err
	}
	relErr := c.releaseAfterLostReply(ctx, req, res)
	return protocol.TryResult{}, errors.Join(&notReplicatedError{
		name: req.name, seq: res.Seq, acked: acked, want: c.cfg.Replicas, timeout: c.cfg.AckTimeout,
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

// releaseAfterLostReply undoes a failed acquire: it drops the waiter's
// ticket and deletes (or hands on) the lock if the try took it. res is the
// try's result, the zero one when its reply was lost. A re-acquire
// (WithHolder) releases only a lock it took afresh: its holder may have had
// the lock before the call and still count on it. It is best effort: each
// try is bounded by releaseTimeout, and failed tries are retried for as
// long as the ttl (1s to 30s), because a paused server runs the lost
// acquire only when it resumes. When ctx ends first it goes on in the
// background, so the caller returns at its deadline; Close waits for it. If
// it fails for good, the lock expires after its ttl.
func (c *Client) releaseAfterLostReply(ctx context.Context, req request, res protocol.TryResult) error {
	passOn := !req.reacquire || res.Outcome == protocol.Acquired
	if !passOn && !req.try.Fair {
		return nil // nothing to undo: no ticket, and the lock is not ours to give up
	}
	return c.pending.Detach(ctx, releaseTimeout, lifetime.CleanupBound(req.ttl), func(ctx context.Context) error {
		_, err := protocol.Leave(ctx, c.rdb, req.keys, c.release(req.try.Holder), passOn)
		return err
	})
}

// releaseTimeout bounds one try of a best-effort release after a failed
// acquire.
const releaseTimeout = time.Second
