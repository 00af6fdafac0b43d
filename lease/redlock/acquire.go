package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/holderid"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// attempt is one acquisition on the quorum.
type attempt struct {
	q    *quorum
	r    family.Request
	keys protocol.Keys
	busy []bool // per node, from the last try: see wakeup
}

func (q *quorum) Begin(r family.Request) family.Attempt {
	return &attempt{q: q, r: r, keys: q.cfg.Keys(r.Name)}
}

// tryFor is one node's try for holder.
func (q *quorum) tryFor(holder string, ttl time.Duration) protocol.Try {
	return protocol.Try{Holder: holder, TTL: ttl, Counter: q.cfg.Counter(), Unfenced: !q.set.quorumFencing}
}

// Try makes one attempt: the acquire script on every node at once, each
// bounded by the node timeout. It succeeds when a majority granted the lock
// and the time spent leaves validity (elapsed < ttl − drift). On failure
// the lock is released again on every node that granted it or may have
// (its call may have run), and the error wraps lease.ErrNotAcquired with
// one [NodeError] per node that failed. When so many nodes refused or
// failed that no majority is left, it stops waiting for the rest.
func (a *attempt) Try(ctx context.Context) (*family.Grant, family.Miss, error) {
	q, name, ttl := a.q, a.r.Name, a.r.TTL
	holder := a.r.Holder
	if holder == "" {
		holder = holderid.New() // a fresh id per attempt: see releaseAfter
	}
	args := q.tryFor(holder, ttl)
	drift := lifetime.Drift(ttl, q.cfg.DriftFactor)
	reacquire := a.r.Holder != ""

	start := time.Now()
	rs := fanout(ctx, q.nodes, q.set.nodeTimeout, acquireOp(a.keys, args, reacquire), q.hopeless)

	granted, again, held, errs, timeouts, unawaited := 0, 0, 0, 0, 0, 0
	var seq, againSeq uint64
	for _, r := range rs {
		switch {
		case r.err == errNotAwaited:
			unawaited++
		case r.err != nil:
			errs++
			if slow(r) {
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
	if again >= q.quorum {
		// WithHolder, and a majority still had this holder's lock: the
		// same lease, with the same token.
		seq = againSeq
	}
	var why error
	switch {
	case granted < q.quorum:
		why = fmt.Errorf("%w: %q: granted by %d of %d nodes, %d needed (held by another: %d, failed: %d, not awaited: %d)",
			lease.ErrNotAcquired, name, granted, len(q.nodes), q.quorum, held, errs, unawaited)
	case q.set.quorumFencing:
		why = q.writeBack(ctx, name, a.keys, holder, rs, seq)
	}
	if why == nil {
		if elapsed := time.Since(start); elapsed >= ttl-drift {
			why = fmt.Errorf("%w: %q: a majority took %v, which leaves no validity of the ttl %v (drift %v)",
				lease.ErrNotAcquired, name, elapsed.Round(time.Microsecond), ttl, drift)
		}
	}
	if why == nil && lifetime.Ended(ctx) != nil {
		// Node clients that do not honour deadlines let the replies in
		// after ctx ended: the caller has gone, so the lock is undone.
		why = fmt.Errorf("%w: %q: the context ended as the nodes granted it", lease.ErrNotAcquired, name)
	}
	if why == nil {
		tok := fence.Token{Key: name, Seq: seq, Holder: holder}
		return &family.Grant{Token: tok, Start: start, Backend: &quorumLease{q: q, keys: a.keys, tok: tok, pending: a.r.Pending}}, family.Miss{}, nil
	}

	a.noteBusy(rs)
	cleanup := a.releaseAfter(ctx, holder, reacquire, rs)
	m := family.Miss{
		Remaining:   freeAt(q.quorum, rs),
		Unavailable: errs-timeouts > len(rs)-q.quorum,
		NoMajority:  errs > len(rs)-q.quorum,
	}
	return nil, m, sentinel.Join(why, failed(rs), cleanup)
}

func acquireOp(k protocol.Keys, t protocol.Try, reacquire bool) func(context.Context, node, family.Conn) (protocol.TryResult, error) {
	if t.Unfenced && !reacquire {
		// No counter and nothing to compare: a plain SET NX PX is enough,
		// and cheaper for the node than a script.
		return func(ctx context.Context, n node, c family.Conn) (protocol.TryResult, error) {
			return protocol.AcquireUnfenced(ctx, c, k, t.Holder, t.TTL)
		}
	}
	return func(ctx context.Context, n node, c family.Conn) (protocol.TryResult, error) {
		return protocol.Acquire(ctx, c, k, t)
	}
}

// hopeless reports whether so many nodes refused or failed that a majority
// can no longer grant the lock; the attempt then stops waiting for the rest.
func (q *quorum) hopeless(rs []reply[protocol.TryResult]) bool {
	no := 0
	for _, r := range rs {
		if r.in && (r.err != nil || !r.val.Got()) {
			no++
		}
	}
	return no > len(rs)-q.quorum
}

// releaseAfter releases a failed attempt's lock on every node that granted
// it or whose call may have run (it may hide a grant). Nodes that answered
// that another holder has it, and nodes whose call surely did not run, are
// skipped. With a known holder id (WithHolder), only the nodes that granted
// it afresh are released: a node that already held the lock for that
// holder keeps it. Each try is bounded by the node timeout, and nodes that
// did not answer are tried again until the ttl (1s to 30s) has passed, or
// until the node refuses connections (it holds nothing now; what it kept
// expires with the ttl); when ctx ends first that goes on in the
// background, counted for Close. It returns the errors of nodes that had
// granted the lock and could not release it at the first try.
//
// Without WithHolder the holder id is fresh for each attempt, so a key left
// behind can never be mistaken for the next attempt's.
func (a *attempt) releaseAfter(ctx context.Context, holder string, reacquire bool, rs []reply[protocol.TryResult]) error {
	q := a.q
	var nodes []node
	var granted, lost []bool
	for i, r := range rs {
		fresh := r.err == nil && r.val.Outcome == protocol.Acquired
		mayHave := r.sent == family.MayHaveRun
		if fresh || (!reacquire && (mayHave || (r.err == nil && r.val.Got()))) {
			nodes = append(nodes, q.nodes[i])
			granted = append(granted, r.err == nil)
			lost = append(lost, mayHave && r.err != nil)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	release := settled(releaseOp(a.keys, holder))
	var inFlight []<-chan struct{} // the calls of lost nodes that have not returned yet
	for _, r := range rs {
		if r.done != nil {
			inFlight = append(inFlight, r.done)
		}
	}
	err := a.r.Pending.Detach(ctx, q.set.nodeTimeout, lifetime.CleanupBound(a.r.TTL), func(ctx context.Context) error {
		out := fanout(ctx, nodes, q.set.nodeTimeout, release, nil)
		// A node whose acquire's reply was lost and that had nothing to
		// release may still get that acquire, behind this release on
		// another connection: it is released once more, in the
		// background, once the calls still in flight have returned here
		// and family.LostCallLag has passed.
		var again []node
		for i, r := range out {
			if r.err == nil && !r.val && lost[i] {
				again, lost[i] = append(again, nodes[i]), false
			}
		}
		if len(again) > 0 {
			a.r.Pending.Go(func() {
				bound, cancel := context.WithTimeout(context.Background(), lifetime.CleanupBound(a.r.TTL))
				defer cancel()
				for _, done := range inFlight {
					select {
					case <-done:
					case <-bound.Done():
						return
					}
				}
				if family.Sleep(bound, family.LostCallLag) == nil {
					fanout(bound, again, q.set.nodeTimeout, release, nil)
				}
			})
		}
		var errs []error
		var left []node
		var leftGranted, leftLost []bool
		for i, r := range out {
			if r.err == nil || (r.sent != family.Ran && nodes[i].probe.Unreachable(ctx)) {
				continue
			}
			left, leftGranted, leftLost = append(left, nodes[i]), append(leftGranted, granted[i]), append(leftLost, lost[i])
			if granted[i] {
				errs = append(errs, fmt.Errorf("release after failed acquire: %w", r.err))
			}
		}
		nodes, granted, lost = left, leftGranted, leftLost
		switch {
		case len(errs) > 0:
			return sentinel.Join(errs...)
		case len(nodes) > 0:
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
func (q *quorum) releaseInBackground(ctx context.Context, p *lifetime.Pending, k protocol.Keys, holder string) {
	p.Go(func() {
		fanout(context.WithoutCancel(ctx), q.nodes, q.set.nodeTimeout, settled(releaseOp(k, holder)), nil)
	})
}

// slow reports whether a node only did not answer in time: a node timeout
// with no refused dial to the node meanwhile (a node whose dial is refused
// is down, not slow).
func slow(r reply[protocol.TryResult]) bool {
	var dial *family.DialError
	return errors.Is(r.err, ErrNodeTimeout) && !errors.As(r.err, &dial)
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

// joinf is a quorum's failure with the nodes' errors, on one line.
func joinf(nodes error, format string, args ...any) error {
	return sentinel.Join(fmt.Errorf(format, args...), nodes)
}
