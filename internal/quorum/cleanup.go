package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/internal/transport"
)

// The one cleanup policy, for every kind and every call that lets go of
// what may be held: after a failed try, after a release that a node did
// not answer, after a lost lease, for a fair waiter that gives up.
//
//   - A node is released only once the pipelines in flight on its
//     transport have ended (settle): the call to undo may not even be
//     written yet, and the release would overtake it on another
//     connection.
//   - Each attempt is bounded (the node timeout for the first attempt,
//     which the caller may wait for, releaseTimeout for the retries, which
//     it does not), and nodes that did not answer are tried again with
//     backoff until the lock's ttl (1s to 30s) has passed: a paused server
//     runs the lost call only when it resumes. A node that refuses
//     connections holds nothing to undo now (what it kept expires with the
//     ttl), so its retries stop.
//   - A node whose call's reply was lost and whose release found nothing
//     is released once more, lostCallLag after the calls still in
//     flight returned: the lost call can reach the server behind the
//     first release.
//   - When the caller's context ends first, all this goes on in the
//     background, counted for Close.

// target is one node a cleanup releases.
type target struct {
	n *Node
	// granted: the node answered that it granted the lock (its failure to
	// release is reported); lost: the call's reply was lost.
	granted, lost bool
}

// undone is what a try's cleanup did: whether one started, and the
// errors of the nodes that had granted the lock and could not release it
// at the first attempt.
type undone struct {
	started bool
	err     error
}

// releaseTimeout bounds one attempt of a cleanup that the caller does not
// wait for.
const releaseTimeout = time.Second

// cleanup releases a failed try's lock on every node that granted it or
// whose call may have run (it may hide a grant). Nodes that answered that
// another holder has it, and nodes whose call surely did not run, are
// skipped. With a known holder id (WithHolder), only the nodes that granted
// it afresh are released: a node that already held the lock for that
// holder keeps it.
func (a *Attempt) cleanup(ctx context.Context, rs []Reply[protocol.TryResult]) undone {
	var ts []target
	var inFlight []<-chan struct{}
	for i, r := range rs {
		fresh := r.Err == nil && r.Val.Outcome == protocol.Acquired
		mayHave := r.Sent == transport.MayHaveRun
		if fresh || (!a.reacquire() && (mayHave || (r.Err == nil && r.Val.Got()))) {
			ts = append(ts, target{n: a.s.cfg.Nodes[i], granted: r.Err == nil, lost: mayHave && r.Err != nil})
		}
		if r.Done != nil {
			inFlight = append(inFlight, r.Done)
		}
	}
	if len(ts) == 0 {
		return undone{}
	}
	return undone{started: true, err: a.s.retry(ctx, a.r.Pending, a.r.TTL, ts, inFlight, a.leaveOp(a.holder, true))}
}

// Abandon takes a fair waiter that gives up out of the queue and, if the
// lock was handed to it meanwhile, passes the lock on. A re-acquire's
// (WithHolder) is passed on only once a try found that the holder id held
// nothing: before that the lock under the id may be one it had before this
// Acquire, afterwards it came from this one (a handoff). Other waiters
// leave nothing behind: a failed try cleans up after itself.
func (a *Attempt) Abandon(ctx context.Context) {
	if a.fair() && a.holder != "" {
		_ = a.s.retry(ctx, a.r.Pending, a.r.TTL, targets(a.s.cfg.Nodes), nil, a.leaveOp(a.holder, !a.reacquire() || a.heldNothing))
	}
}

// leaveOp takes holder out of the fair queue and, with passOn, lets go of
// the lock if holder has it; on an unfair lock it is the release.
func (a *Attempt) leaveOp(holder string, passOn bool) Op[bool] {
	k := a.keys
	if a.sem != nil {
		sem := *a.sem
		return func(ctx context.Context, n *Node, c transport.Conn) (bool, error) {
			return protocol.LeavePermit(ctx, c, sem, n.release(a.s, holder), passOn)
		}
	}
	return func(ctx context.Context, n *Node, c transport.Conn) (bool, error) {
		return protocol.Leave(ctx, c, k, n.release(a.s, holder), passOn)
	}
}

// unlockOp releases holder's lock.
func (s *Strategy) unlockOp(k protocol.Keys, holder string) Op[bool] {
	return func(ctx context.Context, n *Node, c transport.Conn) (bool, error) {
		return protocol.Unlock(ctx, c, k, n.release(s, holder))
	}
}

// targets are nodes to release, none known to have granted.
func targets(nodes []*Node) []target {
	ts := make([]target, len(nodes))
	for i, n := range nodes {
		ts[i] = target{n: n}
	}
	return ts
}

// retry runs op, a release, on ts's nodes under the cleanup policy (see
// above), waiting for the first attempt while ctx lives, and returns that
// attempt's errors of the granted nodes. inFlight are the calls still
// running whose replies a release may overtake.
func (s *Strategy) retry(ctx context.Context, p *lifetime.Pending, ttl time.Duration, ts []target, inFlight []<-chan struct{}, op Op[bool]) error {
	op = settle(op)
	timeout := s.timeout(ttl) // the first attempt's; the retries' are releaseTimeout
	err := p.Detach(ctx, max(releaseTimeout, timeout), lifetime.CleanupBound(ttl), func(ctx context.Context) error {
		nodes := make([]*Node, len(ts))
		for i, t := range ts {
			nodes[i] = t.n
		}
		out := Fanout(ctx, s, nodes, timeout, op, nil)
		timeout = 0
		var again []*Node
		for i, r := range out {
			if r.Err == nil && !r.Val && ts[i].lost {
				again, ts[i].lost = append(again, nodes[i]), false
			}
		}
		if len(again) > 0 {
			p.Go(func() { s.releaseLate(ttl, again, inFlight, op) })
		}
		var errs []error
		var left []target
		for i, r := range out {
			if r.Err == nil || (r.Sent != transport.Ran && nodes[i].Probe.Unreachable(ctx)) {
				continue
			}
			left = append(left, ts[i])
			if ts[i].granted {
				errs = append(errs, fmt.Errorf("release after failed acquire: %w", r.Err))
			}
		}
		ts = left
		switch {
		case len(errs) > 0:
			return sentinel.Join(errs...)
		case len(ts) > 0:
			return errRetry
		}
		return nil
	})
	if errors.Is(err, errRetry) {
		return nil // only nodes that had not granted it are left: nothing to report
	}
	return err
}

// releaseLate releases nodes once more, once the calls in flight have
// returned and lostCallLag has passed, within the cleanup bound.
func (s *Strategy) releaseLate(ttl time.Duration, nodes []*Node, inFlight []<-chan struct{}, op Op[bool]) {
	bound, cancel := context.WithTimeout(context.Background(), lifetime.CleanupBound(ttl))
	defer cancel()
	for _, done := range inFlight {
		select {
		case <-done:
		case <-bound.Done():
			return
		}
	}
	if sleep(bound, lostCallLag) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(bound, releaseTimeout)
	defer cancel()
	Fanout(ctx, s, nodes, 0, op, nil)
}

// errRetry makes Detach retry a cleanup that failed only on nodes whose
// call had failed too: nothing to report, but something to undo.
var errRetry = errors.New("quorum: cleanup incomplete")

// detached returns a context that has ended, with ctx's values: a cleanup
// under it runs wholly in the background.
func detached(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel()
	return ctx
}

// sleep waits for d or until ctx ends, whose error it returns.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lostCallLag is how long after a call whose reply was lost returned here
// it is taken to have reached its server, if it ever does: a cleanup that
// found nothing to release releases once more that much later, since the
// lost call can reach the server behind the cleanup's first release, on
// another connection.
const lostCallLag = 25 * time.Millisecond
