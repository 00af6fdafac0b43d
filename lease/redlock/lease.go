package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

var _ lease.Interface = (*Lease)(nil)

// Lease is a lock held on a majority of the nodes, until its local deadline
// at the latest. It satisfies [lease.Interface] and shares the single-node
// lease's lifetime: Done closes, and Context is cancelled, when the deadline
// passes, a refresh finds the lock gone from a majority, or on Release;
// Refresh, Release and Reissue are serialised. Its methods are safe for
// concurrent use.
//
// Methods on a nil *Lease do no I/O: Release, Refresh, Reissue and Err
// return an error wrapping ErrInvalid, Held is false and Done is closed.
type Lease struct {
	life *lifetime.Life
}

// nilLife is the lifetime of a nil *Lease.
var nilLife = lifetime.Nil(lifetime.Config{Lost: ErrLost, Released: ErrReleased, Invalid: ErrInvalid})

func (l *Lease) lf() *lifetime.Life {
	if l == nil {
		return nilLife
	}
	return l.life
}

func newLease(c *Client, k protocol.Keys, tok fence.Token, start time.Time, ttl time.Duration, ac family.Acquire) *Lease {
	b := &backend{c: c, keys: k, tok: tok}
	cfg := lifetime.Config{Lost: ErrLost, Released: ErrReleased, Invalid: ErrInvalid,
		DriftFactor: c.cfg.DriftFactor, TTL: ttl, KeepAlive: ac.Interval,
		Hooks: c.cfg.Hooks, Kind: observe.KindRedlock, Pending: &c.pending}
	return &Lease{life: lifetime.Start(b, tok, start, ttl, cfg)}
}

// Token returns the fencing token of this lease: Key is the lock name,
// Holder the lease's id. With quorum fencing (see [WithQuorumFencing]) Seq
// is the highest counter among the nodes that granted the lock, written
// back to a majority, and grows from one acquisition to the next (and with
// [Lease.Reissue]). Without it, Seq is 0: no counter is kept, the lock is
// for efficiency only, and a verifier refuses the token.
func (l *Lease) Token() fence.Token { return l.lf().Token() }

// Name returns the lock name.
func (l *Lease) Name() string { return l.lf().Token().Key }

// Holder returns the lease's holder id, stored on every node; save it for a
// re-acquire after a restart (see [lease.WithHolder]).
func (l *Lease) Holder() string { return l.lf().Token().Holder }

// Deadline returns the local deadline: the start of the acquire (or of the
// last successful refresh) + ttl − drift, on this process's monotonic clock.
// The lock must not be relied upon after it; the nodes' keys may still live
// a little longer.
func (l *Lease) Deadline() time.Time { return l.lf().Deadline() }

// Done returns a channel that is closed when the lease ends: its deadline
// passes, a refresh finds it lost, or it is released. [Lease.Err] says which.
func (l *Lease) Done() <-chan struct{} { return l.lf().Done() }

// Context returns a context that is cancelled when the lease ends, whose
// context.Cause is [Lease.Err]: run the protected work under it so that it
// stops when the lease is lost.
func (l *Lease) Context() context.Context { return l.lf().Context() }

// Held reports whether the lease is still held by the local clock. A true
// answer is only a hint: the resource must check the token.
func (l *Lease) Held() bool { return l.lf().Held() }

// Err returns nil while the lease is held. After Done is closed it returns
// an error wrapping [ErrLost] (deadline passed, or a refresh found the
// lease gone from a majority) or [ErrReleased].
func (l *Lease) Err() error { return l.lf().Err() }

// Refresh extends the lease to ttl from now. It runs the lease's acquire
// script with re-acquire on every node at once: where a node still holds the
// lease, that resets its ttl; where the key is gone (expired early, evicted,
// node restarted empty), it sets the key again. The refresh succeeds only if
// a majority still held the lease — keys set again do not count — and the
// time taken leaves validity; the new deadline is the start of the refresh +
// ttl − drift. With quorum fencing on, a node whose key was set again gets
// the token's Seq back as its counter floor and its lock's Seq, so a node
// that restarted empty is healed while the lease is held.
//
// When a majority of nodes answer that the lease is gone (key missing or
// held by another holder), the lease ends: Done closes, the lock is released
// on every node in the background, and the error wraps [ErrLost]. When the
// lease cannot be confirmed for want of answers (node errors, timeouts, ctx
// ended) or the refresh took too long, the lease is left as it was — its
// deadline still runs — and the error joins the node errors. Refresh on an
// ended lease returns its Err without I/O. Errors of nodes in the minority
// are not reported when the refresh succeeds.
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	return l.lf().Refresh(ctx, ttl)
}

// Release gives the lock up on every node at once, each bounded by the node
// timeout, and closes Done. Each node deletes the key only if this lease
// still holds it there, and then publishes on the lock's release channel to
// wake waiters.
//
// It returns nil when a majority released it and no node failed. Otherwise
// the error joins one [NodeError] per failed node (its key stays until the
// ttl runs out) and, when a majority of nodes answered that they no longer
// had the lease, [ErrLost]: it had expired or been taken before the release,
// so the protected work may have overlapped another holder's.
//
// Release after Release returns nil without I/O, whatever the first found.
// A lease that was lost is still released everywhere, once. Release honours
// ctx; in a deferred call where ctx may have ended, pass
// context.WithoutCancel(ctx).
func (l *Lease) Release(ctx context.Context) error { return l.lf().Release(ctx) }

// Reissue gives the lease a new token, above floor and above the counters
// of a majority, without letting go of the lock, and returns it. Use it (or
// heal.Write, which does) when a verifier rejected the token because the
// storage has seen a higher Seq than the nodes remember: their counters
// went backwards after restarts without persistence.
//
// Every node that still holds the lease lifts its counter to floor,
// increments it and stores the result as the lock's Seq; the new Seq is the
// highest of those, and it is written back (as after an acquire) until a
// majority has it. Nodes that no longer hold the lease have their counter
// lifted too. When a majority answer that the lease is gone, the lease ends
// and the error wraps [ErrLost]; when too few answer, the token is
// unchanged and the error joins the node errors. Reissue needs quorum
// fencing: without it the error wraps [ErrInvalid].
func (l *Lease) Reissue(ctx context.Context, floor uint64) (fence.Token, error) {
	return l.lf().Reissue(ctx, floor)
}

// backend is redlock's side of a lease's lifetime.
type backend struct {
	c    *Client
	keys protocol.Keys
	tok  fence.Token // Key and Holder; Seq is the lifetime's
}

func (b *backend) Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error {
	c, name := b.c, b.tok.Key
	rs := fanout(ctx, c.nodes, c.cfg.NodeTimeout, acquireOp(b.keys, c.tryFor(b.tok.Holder, ttl), true), nil)
	held, gone := 0, 0
	var reset []node
	for i, r := range rs {
		switch {
		case r.err != nil:
		case r.val.Outcome == protocol.Reacquired:
			held++
		case r.val.Outcome == protocol.Acquired:
			gone++
			reset = append(reset, c.nodes[i])
		default: // another holder has it there
			gone++
		}
	}
	switch {
	case gone > len(c.nodes)-c.quorum:
		c.releaseInBackground(ctx, c.nodes, b.keys, b.tok.Holder)
		return errors.Join(fmt.Errorf("%w: %q: refresh found it gone from %d of %d nodes", ErrLost, name, gone, len(c.nodes)),
			failed(rs))
	case held < c.quorum:
		return errors.Join(fmt.Errorf("redlock: refresh %q: confirmed on %d of %d nodes, %d needed; the deadline is unchanged",
			name, held, len(c.nodes), c.quorum), lifetime.Ended(ctx), failed(rs))
	}
	if c.cfg.QuorumFencing && len(reset) > 0 {
		fanout(ctx, reset, c.cfg.NodeTimeout, adoptOp(b.keys, b.tok.Holder, tok.Seq, c.counter()), nil)
	}
	return nil
}

func (b *backend) Release(ctx context.Context) error {
	c := b.c
	rs := fanout(ctx, c.nodes, c.cfg.NodeTimeout, releaseOp(b.keys, b.tok.Holder), nil)
	gone := 0
	for _, r := range rs {
		if r.err == nil && !r.val {
			gone++
		}
	}
	var why error
	if gone > len(c.nodes)-c.quorum {
		why = fmt.Errorf("%w: %q: %d of %d nodes no longer had it at release", ErrLost, b.tok.Key, gone, len(c.nodes))
	}
	return errors.Join(why, failed(rs))
}

func (b *backend) Reissue(ctx context.Context, floor uint64) (uint64, error) {
	c, name := b.c, b.tok.Key
	if !c.cfg.QuorumFencing {
		return 0, invalid("reissue %q: tokens need WithQuorumFencing", name)
	}
	rs := fanout(ctx, c.nodes, c.cfg.NodeTimeout, reissueOp(b.keys, b.tok.Holder, floor, c.counter()), nil)
	held, gone, seq := 0, 0, uint64(0)
	for _, r := range rs {
		switch {
		case r.err != nil:
		case r.val > 0:
			held++
			seq = max(seq, r.val)
		default:
			gone++
		}
	}
	switch {
	case gone > len(c.nodes)-c.quorum:
		return 0, errors.Join(fmt.Errorf("%w: %q: reissue found it gone from %d of %d nodes", ErrLost, name, gone, len(c.nodes)),
			failed(rs))
	case held < c.quorum:
		return 0, errors.Join(fmt.Errorf("redlock: reissue %q: held on %d of %d nodes, %d needed; the token is unchanged",
			name, held, len(c.nodes), c.quorum), lifetime.Ended(ctx), failed(rs))
	}
	// Every node that answered with less than seq takes seq: its counter,
	// and its lock's Seq where it holds the lease.
	have := 0
	var lag []node
	for i, r := range rs {
		switch {
		case r.err != nil:
		case r.val == seq:
			have++
		default:
			lag = append(lag, c.nodes[i])
		}
	}
	out := fanout(ctx, lag, c.cfg.NodeTimeout, adoptOp(b.keys, b.tok.Holder, seq, c.counter()), nil)
	for _, r := range out {
		if r.err == nil {
			have++
		}
	}
	if have < c.quorum {
		return 0, errors.Join(fmt.Errorf("redlock: reissue %q: Seq %d reached %d of %d nodes, %d needed; the token is unchanged",
			name, seq, have, len(c.nodes), c.quorum), lifetime.Ended(ctx), failed(out))
	}
	return seq, nil
}

func acquireOp(k protocol.Keys, t protocol.Try, reacquire bool) func(context.Context, node) (protocol.TryResult, error) {
	if t.Unfenced && !reacquire {
		// No counter and nothing to compare: a plain SET NX PX is enough,
		// and cheaper for the node than a script.
		return func(ctx context.Context, n node) (protocol.TryResult, error) {
			return protocol.AcquireUnfenced(ctx, n.rdb, k, t.Holder, t.TTL)
		}
	}
	return func(ctx context.Context, n node) (protocol.TryResult, error) {
		return protocol.Acquire(ctx, n.rdb, k, t)
	}
}

func releaseOp(k protocol.Keys, holder string) func(context.Context, node) (bool, error) {
	return func(ctx context.Context, n node) (bool, error) {
		return protocol.Unlock(ctx, n.rdb, k, protocol.Release{Holder: holder, PubSub: n.notify.PubSub()})
	}
}

func reissueOp(k protocol.Keys, holder string, floor uint64, counter protocol.Counter) func(context.Context, node) (uint64, error) {
	return func(ctx context.Context, n node) (uint64, error) {
		return protocol.Reissue(ctx, n.rdb, k, holder, floor, counter)
	}
}

func adoptOp(k protocol.Keys, holder string, seq uint64, counter protocol.Counter) func(context.Context, node) (uint64, error) {
	return func(ctx context.Context, n node) (uint64, error) {
		return protocol.Adopt(ctx, n.rdb, k, holder, seq, counter)
	}
}

func advanceOp(k protocol.Keys, floor uint64, counter protocol.Counter) func(context.Context, node) (uint64, error) {
	return func(ctx context.Context, n node) (uint64, error) {
		return protocol.Advance(ctx, n.rdb, k, floor, counter)
	}
}
