package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/script"
)

// Lease is a lock held on a majority of the nodes, until its local deadline
// at the latest. Its methods are safe for concurrent use.
type Lease struct {
	c     *Client
	keys  script.Keys
	token fence.Token

	op       sync.Mutex // serializes Refresh and Release
	released bool       // guarded by op

	mu       sync.Mutex
	deadline time.Time // monotonic
	timer    *time.Timer
	done     chan struct{}
	err      error              // set when done closes
	stopKA   context.CancelFunc // stops the keep-alive; nil without one
}

func newLease(c *Client, k script.Keys, tok fence.Token, deadline time.Time) *Lease {
	l := &Lease{c: c, keys: k, token: tok, deadline: deadline, done: make(chan struct{})}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(deadline), l.expire)
	l.mu.Unlock()
	return l
}

// Token returns the fencing token of this lease: Key is the lock name,
// Holder the lease's id, and Seq the highest counter among the nodes that
// granted the lock. Seq increases from one acquisition to the next only
// under quorum fencing (see [WithQuorumFencing]); pass the token to a
// verifier at the storage for safety either way.
func (l *Lease) Token() fence.Token { return l.token }

// Name returns the lock name.
func (l *Lease) Name() string { return l.token.Key }

// Holder returns the lease's holder id, a random UUID stored on every node.
func (l *Lease) Holder() string { return l.token.Holder }

// Deadline returns the local deadline: the start of the acquire (or of the
// last successful refresh) + ttl − drift, on this process's monotonic clock.
// The lock must not be relied upon after it; the nodes' keys may still live
// a little longer.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel that is closed when the lease ends: its deadline
// passes, a refresh finds it lost, or it is released. [Lease.Err] says which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Held reports whether the lease is still held by the local clock. A true
// answer is only a hint: the resource must check the token.
func (l *Lease) Held() bool {
	select {
	case <-l.done:
		return false
	default:
		return time.Now().Before(l.Deadline())
	}
}

// Err returns nil while the lease is held. After Done is closed it returns
// an error wrapping [ErrLost] (deadline passed, or a refresh found the
// lease gone from a majority) or [ErrReleased].
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// expire runs on the timer: the lease is lost once its deadline has passed.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if d := time.Until(l.deadline); d > 0 { // extended meanwhile
		l.timer.Reset(d)
		return
	}
	l.finishLocked(fmt.Errorf("%w: %q: local deadline passed", ErrLost, l.token.Key))
}

func (l *Lease) finish(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finishLocked(err)
}

func (l *Lease) finishLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.timer.Stop()
	if l.stopKA != nil {
		l.stopKA()
	}
	close(l.done)
}

// start begins what the acquire options ask for once the lease is obtained.
func (l *Lease) start(ctx context.Context, ttl time.Duration, ac acquireConfig) {
	if !ac.keepAlive {
		return
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		cancel()
		return
	}
	l.stopKA = cancel
	go l.keepAlive(kctx, ttl, ac.interval)
}

// keepAlive refreshes every period until the lease ends.
func (l *Lease) keepAlive(ctx context.Context, ttl, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		_ = l.Refresh(rctx, ttl) // a loss ends the lease; other failures retry next tick
		cancel()
	}
}

// extend moves the deadline, unless the lease has ended meanwhile.
func (l *Lease) extend(deadline time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.deadline = deadline
	l.timer.Reset(time.Until(deadline))
	return true
}

// Refresh extends the lease to ttl from now. It runs the lease's acquire
// script with re-acquire on every node at once: where a node still holds the
// lease, that resets its ttl; where the key is gone (expired early, evicted,
// node restarted empty), it sets the key again. The refresh succeeds only if
// a majority still held the lease — keys set again do not count — and the
// time taken leaves validity; the new deadline is the start of the refresh +
// ttl − drift.
//
// Setting a lost key again increments that node's counter, as any
// acquisition does. That is harmless: counters must never go backwards, and
// an extra step keeps that. The token does not change; it stays the one
// issued at acquisition, which the storage may already have seen. With
// quorum fencing on, Refresh also lifts such a node's counter to the token's
// Seq, so a node that restarted empty is healed while the lease is held.
//
// When a majority of nodes answer that the lease is gone (key missing or
// held by another holder), the lease ends: Done closes, the lock is released
// on every node, and the error wraps [ErrLost]. When the lease cannot be
// confirmed for want of answers (node errors, timeouts, ctx ended) or the
// refresh took too long, the lease is left as it was — its deadline still
// runs — and the error joins the node errors, as the lease's Refresh does on
// an I/O error. Refresh on an ended lease returns its Err without I/O.
// Errors of nodes in the minority are not reported when the refresh
// succeeds.
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	c, name := l.c, l.token.Key
	if err := c.check(name, ttl); err != nil {
		return err
	}
	l.op.Lock()
	defer l.op.Unlock()
	if err := l.Err(); err != nil {
		return err
	}

	drift := c.drift(ttl)
	args := script.AcquireArgs{Holder: l.token.Holder, TTL: ttl, ClockFloor: c.cfg.clockFloor, Reacquire: true}
	start := time.Now()
	rs := fanout(ctx, c.nodes, c.cfg.nodeTimeout, acquireOp(l.keys, args), nil)
	held, gone := 0, 0
	var reset []node
	for i, r := range rs {
		switch {
		case r.err != nil:
		case r.val.Reacquired:
			held++
		case r.val.Acquired:
			gone++
			reset = append(reset, c.nodes[i])
		default: // another holder has it there
			gone++
		}
	}

	elapsed := time.Since(start)
	switch {
	case gone > len(c.nodes)-c.quorum:
		why := fmt.Errorf("%w: %q: refresh found it gone from %d of %d nodes", ErrLost, name, gone, len(c.nodes))
		l.finish(why)
		out := fanout(context.WithoutCancel(ctx), c.nodes, c.cfg.nodeTimeout, releaseOp(l.keys, l.token.Holder), nil)
		return errors.Join(why, failed(rs), cleanupErr(out))
	case held < c.quorum:
		return errors.Join(fmt.Errorf("redlock: refresh %q: confirmed on %d of %d nodes, %d needed; the deadline is unchanged",
			name, held, len(c.nodes), c.quorum), ctx.Err(), failed(rs))
	case elapsed >= ttl-drift:
		return fmt.Errorf("redlock: refresh %q took %v, which leaves no validity of the ttl %v; the deadline is unchanged",
			name, elapsed, ttl)
	case !l.extend(start.Add(ttl - drift)):
		return l.Err() // the deadline passed while refreshing
	}
	if c.cfg.quorumFencing && len(reset) > 0 {
		fanout(ctx, reset, c.cfg.nodeTimeout, advanceOp(l.keys, l.token.Seq), nil)
	}
	return nil
}

func acquireOp(k script.Keys, args script.AcquireArgs) func(context.Context, node) (script.AcquireResult, error) {
	return func(ctx context.Context, n node) (script.AcquireResult, error) {
		return script.Acquire(ctx, n.rdb, k, args)
	}
}

// cleanupErr labels the errors of a release made after a loss.
func cleanupErr(rs []reply[bool]) error {
	if err := failed(rs); err != nil {
		return fmt.Errorf("release after lost lease: %w", err)
	}
	return nil
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
// Release after Release returns nil without I/O. A lease that was lost is
// still released everywhere. Release honours ctx; in a deferred call where
// ctx may have ended, pass context.WithoutCancel(ctx).
func (l *Lease) Release(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	l.finish(fmt.Errorf("%w: %q", ErrReleased, l.token.Key))

	c := l.c
	rs := fanout(ctx, c.nodes, c.cfg.nodeTimeout, releaseOp(l.keys, l.token.Holder), nil)
	gone := 0
	for _, r := range rs {
		if r.err == nil && !r.val {
			gone++
		}
	}
	var why error
	if gone > len(c.nodes)-c.quorum {
		why = fmt.Errorf("%w: %q: %d of %d nodes no longer had it at release", ErrLost, l.token.Key, gone, len(c.nodes))
	}
	return errors.Join(why, failed(rs))
}
