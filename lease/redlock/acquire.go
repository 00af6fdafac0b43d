package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/batch"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/observe"
)

// TryAcquire makes one attempt to take the lock name for ttl: it runs the
// lease's acquire script on every node at once, each bounded by the node
// timeout, and succeeds when a majority granted the lock and the time spent
// leaves some validity (elapsed < ttl − drift). The lease's local deadline is
// then the start of the attempt + ttl − drift.
//
// On failure the lock is released again on every node that granted it or
// whose reply may have been lost (such a node may have taken it; a refused
// connection cannot have), and the error wraps
// [ErrNotAcquired], joined with one [NodeError] per node that failed and, if
// ctx ended, ctx.Err(). Nodes that are held by another holder are not
// failures. Errors of nodes in the minority are dropped when the lock is
// obtained.
//
// The nodes' answers wait for no one: a node that is down or paused costs
// at most the node timeout, and when so many nodes refused or failed that
// no majority is left, TryAcquire stops waiting for the rest.
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...lease.AcquireOption) (*Lease, error) {
	return emit.Observed(c.hooks(), observe.KindRedlock, ctx, name, ttl, false, ErrNotAcquired, func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		ac, err := c.request(ctx, name, ttl, opts)
		if err != nil {
			return nil, err
		}
		p.Attempts++
		l, _, err := c.try(ctx, name, ttl, ac)
		return l, err
	})
}

// hooks returns the client's hooks; nil for a nil client.
func (c *Client) hooks() *observe.Hooks {
	if c == nil {
		return nil
	}
	return c.cfg.Hooks
}

// request validates an acquisition before any I/O.
func (c *Client) request(ctx context.Context, name string, ttl time.Duration, opts []lease.AcquireOption) (family.Acquire, error) {
	if c == nil || len(c.nodes) == 0 {
		return family.Acquire{}, invalid("nil client")
	}
	if ctx == nil {
		return family.Acquire{}, invalid("nil context")
	}
	if c.closed.Load() {
		return family.Acquire{}, invalid("the client is closed")
	}
	if err := c.check(name, ttl); err != nil {
		return family.Acquire{}, err
	}
	ac, err := family.ApplyAcquire(&c.cfg, ttl, opts)
	if err == nil && ac.Holder != "" {
		// A cleanup still running (a release that went to the background)
		// may be under the same holder id: it would delete the lock this
		// re-acquire is about to get back.
		if werr := c.pending.Wait(ctx); werr != nil {
			return family.Acquire{}, errors.Join(fmt.Errorf("%w: %q", ErrNotAcquired, name), werr)
		}
	}
	return ac, err
}

// Acquire takes the lock name for ttl, waiting while it is held. It makes
// attempts as [Client.TryAcquire] does; between them it waits for a release
// to be published on any node (see [WithWakeup]), for the time when the
// nodes' remaining ttls say a majority will be free, or for a jittered
// exponential backoff (see lease.WithBackoff), whichever comes first.
//
// When ctx ends first, the error is both ErrNotAcquired and ctx.Err(),
// joined with the node errors of the last attempt.
//
// Nodes that fail decide as follows:
//   - When so many nodes fail with hard errors (a refused connection, an
//     error reply: anything but [ErrNodeTimeout], or a node timeout after
//     a failed dial to that node) that no majority is left
//     even if every other node answered, the lock service is unavailable
//     and Acquire returns that error at once instead of waiting, as the
//     lease does on an I/O error.
//   - A miss because nodes did not answer within the node timeout (a
//     loaded client or server, a burst of waiters, a paused node) is
//     retried after the backoff like a held lock, while ctx lasts.
//   - But when every attempt for a whole ttl failed a majority of the nodes
//     (by timeouts or errors), the lock service counts as unavailable:
//     Acquire returns the last attempt's error, so that a frozen majority
//     cannot hang an Acquire whose ctx has no deadline. Any attempt that a
//     majority answered (granted, or held by another) starts that count
//     again.
//
// [Client.TryAcquire], one attempt, returns every miss at once.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...lease.AcquireOption) (*Lease, error) {
	return emit.Observed(c.hooks(), observe.KindRedlock, ctx, name, ttl, true, ErrNotAcquired, func(ctx context.Context, p *emit.Progress) (*Lease, error) {
		ac, err := c.request(ctx, name, ttl, opts)
		if err != nil {
			return nil, err
		}
		return c.wait(ctx, name, ttl, ac, p)
	})
}

// wait is Acquire once the request is valid.
func (c *Client) wait(ctx context.Context, name string, ttl time.Duration, ac family.Acquire, p *emit.Progress) (*Lease, error) {
	var wake *wakeup
	defer func() { wake.close() }()
	var failing time.Time // the start of the attempts that all failed a majority; zero: the last did not
	for attempt := 0; ; attempt++ {
		wake.drain()
		p.Attempts++
		begun := time.Now()
		l, miss, err := c.try(ctx, name, ttl, ac)
		if l != nil {
			// Wake-ups that came during the attempt were for the lock
			// it took: closing must not pass them on to the next waiter.
			wake.drain()
			return l, nil
		}
		p.Handoff = false
		if lifetime.Ended(ctx) != nil || miss.unavailable {
			return nil, err // try joined ctx.Err()
		}
		switch {
		case !miss.noMajority:
			failing = time.Time{}
		case failing.IsZero():
			failing = begun
		case time.Since(failing) >= ttl:
			return nil, errors.Join(fmt.Errorf("%w: %q: every attempt for %v (the ttl) failed a majority of the nodes: the lock service is unavailable",
				ErrNotAcquired, name, time.Since(failing).Round(time.Millisecond)), err)
		}
		if c.cfg.Wakeup && wake == nil {
			// Listen only once the lock was found busy, so an
			// uncontended acquire costs one round trip and no
			// subscription. The next attempt, made as soon as the
			// subscriptions are confirmed, covers a release published
			// before then.
			wake = c.listen(ctx, c.keys(name).Channel)
			continue
		}
		wait := c.cfg.Backoff().Wait(attempt)
		if miss.freeIn > 0 && miss.freeIn < wait {
			wait = miss.freeIn + time.Millisecond
		}
		woken, werr := wake.wait(ctx, wait, c.cfg.MinBackoff, miss.busy)
		if werr != nil {
			return nil, errors.Join(err, werr)
		}
		p.Handoff = woken
	}
}

// miss tells a waiting Acquire what a failed attempt found.
type miss struct {
	freeIn      time.Duration // when a majority of nodes may be free; 0: unknown
	busy        []bool        // per node: it did not grant the lock (held, or failed)
	unavailable bool          // a majority of nodes failed with hard errors (not node timeouts)
	noMajority  bool          // a majority of nodes failed, by errors or node timeouts
}

// tryFor is one node's try for holder.
func (c *Client) tryFor(holder string, ttl time.Duration) protocol.Try {
	return protocol.Try{Holder: holder, TTL: ttl, Counter: c.counter(), Unfenced: !c.cfg.QuorumFencing}
}

// try makes one attempt.
func (c *Client) try(ctx context.Context, name string, ttl time.Duration, ac family.Acquire) (*Lease, miss, error) {
	k := c.keys(name)
	holder := ac.Holder
	if holder == "" {
		holder = uuid.NewString() // a fresh id per attempt: see releaseAfter
	}
	args := c.tryFor(holder, ttl)
	drift := c.drift(ttl)

	start := time.Now()
	rs := fanout(ctx, c.nodes, c.cfg.NodeTimeout, acquireOp(k, args, ac.Holder != ""), c.hopeless)

	granted, again, held, errs, timeouts, unawaited := 0, 0, 0, 0, 0, 0
	var seq, againSeq uint64
	for _, r := range rs {
		switch {
		case r.err == errNotAwaited:
			unawaited++
		case r.err != nil:
			errs++
			if slow(r.err) {
				timeouts++
			}
		case r.val.Got():
			granted++
			seq = max(seq, r.val.Seq)
			if r.val.Outcome == protocol.Reacquired {
				again++
				againSeq = max(againSeq, r.val.Seq)
			}
		default:
			held++
		}
	}
	if again >= c.quorum {
		// WithHolder, and a majority still had this holder's lock: the
		// same lease, with the same token.
		seq = againSeq
	}
	var why error
	switch {
	case granted < c.quorum:
		why = fmt.Errorf("%w: %q: granted by %d of %d nodes, %d needed (held by another: %d, failed: %d, not awaited: %d)",
			ErrNotAcquired, name, granted, len(c.nodes), c.quorum, held, errs, unawaited)
	case c.cfg.QuorumFencing:
		why = c.writeBack(ctx, name, k, holder, rs, seq)
	}
	if why == nil {
		if elapsed := time.Since(start); elapsed >= ttl-drift {
			why = fmt.Errorf("%w: %q: a majority took %v, which leaves no validity of the ttl %v (drift %v)",
				ErrNotAcquired, name, elapsed.Round(time.Microsecond), ttl, drift)
		}
	}
	if why == nil && lifetime.Ended(ctx) != nil {
		// Node clients that do not honour deadlines let the replies in
		// after ctx ended: the caller has gone, so the lock is undone.
		why = fmt.Errorf("%w: %q: the context ended as the nodes granted it", ErrNotAcquired, name)
	}
	if why == nil {
		tok := fence.Token{Key: name, Seq: seq, Holder: holder}
		return newLease(c, k, tok, start, ttl, ac), miss{}, nil
	}

	cleanup := c.releaseAfter(ctx, k, holder, ttl, ac.Holder != "", rs)
	if ce := lifetime.Ended(ctx); ce != nil {
		why = errors.Join(why, ce)
	}
	m := miss{
		freeIn:      freeAt(c.quorum, rs),
		busy:        make([]bool, len(rs)),
		unavailable: errs-timeouts > len(rs)-c.quorum,
		noMajority:  errs > len(rs)-c.quorum,
	}
	for i, r := range rs {
		m.busy[i] = r.err != nil || !r.val.Got()
	}
	return nil, m, errors.Join(why, failed(rs), cleanup)
}

// hopeless reports whether so many nodes refused or failed that a majority
// can no longer grant the lock; the attempt then stops waiting for the rest.
func (c *Client) hopeless(rs []reply[protocol.TryResult]) bool {
	no := 0
	for _, r := range rs {
		if r.in && (r.err != nil || !r.val.Got()) {
			no++
		}
	}
	return no > len(rs)-c.quorum
}

// releaseAfter releases a failed attempt's lock on every node that granted
// it or whose reply may have been lost (it may hide a grant). Nodes that
// answered that another holder has the lock, and nodes whose call surely did
// not run (connection refused, an error reply), cannot hold ours, so they
// are skipped. With a known holder id (reacquire, WithHolder), only the
// nodes that granted it afresh are released: a node that already held the
// lock for that holder, or may have, keeps it, since the holder may still
// count on it. Each try is bounded by the node timeout, and nodes that did
// not answer are tried again until the ttl (1s to 30s) has passed; when ctx
// ends first, that goes on in the background while the acquire returns. It
// returns the errors of nodes that had granted the lock and could not
// release it at the first try: their key stays until its ttl runs out or a
// retry gets it. (Release errors of nodes whose acquire already failed add
// nothing and are dropped.)
//
// Without WithHolder the holder id is fresh for each attempt, so a key left
// behind can never be mistaken for the next attempt's.
func (c *Client) releaseAfter(ctx context.Context, k protocol.Keys, holder string, ttl time.Duration, reacquire bool, rs []reply[protocol.TryResult]) error {
	var nodes []node
	var granted []bool
	for i, r := range rs {
		fresh := r.err == nil && r.val.Outcome == protocol.Acquired
		lost := r.err != nil && mayHaveRun(r.err)
		if fresh || (!reacquire && (lost || (r.err == nil && r.val.Got()))) {
			nodes = append(nodes, c.nodes[i])
			granted = append(granted, r.err == nil)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	// Each try releases on the nodes that have not answered yet; it fails,
	// and is retried, while any node has not. Only the errors of nodes that
	// had granted the lock are reported.
	err := c.pending.Detach(ctx, c.cfg.NodeTimeout, lifetime.CleanupBound(ttl), func(ctx context.Context) error {
		out := fanout(ctx, nodes, c.cfg.NodeTimeout, releaseOp(k, holder), nil)
		var errs, pending []error
		var left []node
		var leftGranted []bool
		for i, r := range out {
			if r.err == nil {
				continue
			}
			left, leftGranted = append(left, nodes[i]), append(leftGranted, granted[i])
			pending = append(pending, r.err)
			if granted[i] {
				errs = append(errs, fmt.Errorf("release after failed acquire: %w", r.err))
			}
		}
		nodes, granted = left, leftGranted
		switch {
		case len(errs) > 0:
			return errors.Join(errs...)
		case len(pending) > 0:
			return errRetry
		}
		return nil
	})
	if errors.Is(err, errRetry) {
		return nil // only nodes that had not granted it are left: nothing to report
	}
	return err
}

// errRetry makes Detach retry a cleanup that failed only on nodes whose
// acquire had failed too: nothing to report, but something to undo.
var errRetry = errors.New("redlock: cleanup incomplete")

// releaseInBackground releases the lock on nodes without making the caller
// wait, bounded by the node timeout: the cleanup after a lost lease.
func (c *Client) releaseInBackground(ctx context.Context, nodes []node, k protocol.Keys, holder string) {
	c.pending.Go(func() { fanout(context.WithoutCancel(ctx), nodes, c.cfg.NodeTimeout, releaseOp(k, holder), nil) })
}

// slow reports whether a node's error says only that it did not answer in
// time: [ErrNodeTimeout], without a failed dial since the attempt began (a
// node whose dial was refused is down, not slow).
func slow(err error) bool {
	var dial *family.DialError
	return errors.Is(err, ErrNodeTimeout) && !errors.As(err, &dial)
}

// mayHaveRun reports whether a node's failed call may still have run on the
// server: anything but a refused connection, an error reply from Redis or a
// call the node's batch never sent (its caller left first).
func mayHaveRun(err error) bool {
	if errors.Is(err, batch.ErrNotSent) {
		return false
	}
	if errors.Is(err, ErrNodeTimeout) || errors.Is(err, errNotAwaited) {
		return true
	}
	return protocol.MayHaveRun(err)
}

// freeAt estimates, from the remaining ttls the busy nodes reported, how long
// until a majority of nodes is free; 0 when unknown.
func freeAt(quorum int, rs []reply[protocol.TryResult]) time.Duration {
	free := 0
	var busy []time.Duration
	for _, r := range rs {
		switch {
		case r.err != nil:
		case r.val.Got(): // released again by releaseAfter
			free++
		case r.val.PTTL >= 0:
			busy = append(busy, r.val.PTTL)
		}
	}
	need := quorum - free
	if need <= 0 || need > len(busy) {
		return 0
	}
	slices.Sort(busy)
	return busy[need-1]
}
