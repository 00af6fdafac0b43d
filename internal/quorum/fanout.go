package quorum

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/internal/transport"
)

// Op is one call to one node, through the node's transport (c).
type Op[T any] func(ctx context.Context, n *Node, c transport.Conn) (T, error)

// Reply is one node's answer to a fanned-out call. Err is nil when the
// node answered Val, else the node's error (see Config.NodeError). Sent
// says what the call did: a call that Fanout stopped waiting for was
// either never made (NotSent) or is in flight (MayHaveRun). In reports
// whether the node's answer arrived.
type Reply[T any] struct {
	Val  T
	Err  error
	Sent transport.Sent
	In   bool
	// Done, for a call still in flight when Fanout returned, closes when
	// it returns; nil otherwise.
	Done <-chan struct{}
}

// call states of one node's call in Fanout.
const (
	waiting int32 = iota // not sent yet (not started, or queued in the node's transport)
	making               // sent, or being sent: it may run
	dropped              // Fanout stopped waiting first: it will not be sent
)

// Fanout calls op on every node of nodes at once, through the node's
// transport, each call under ctx and, when timeout is not 0, a deadline
// timeout away. It returns when every node has answered, when ctx ends,
// or when settled (if not nil), given the replies so far, says so: at once
// (0: the outcome cannot change), or after a grace for the rest (d > 0:
// the outcome is known, and late answers only add to it); a negative
// duration waits on. Replies not in by then carry the node's
// timeout error, or ctx's when the caller's context ended, or
// ErrNotAwaited when settled ended the wait; and whether their call was
// made, as a value. A node that refused a direct dial meanwhile is named in
// its error, and its call was not sent.
//
// One node is called inline, on the caller's goroutine. Otherwise the
// calls run on the client's workers; those still running when Fanout
// returns are cancelled and left to finish (they never block).
func Fanout[T any](ctx context.Context, s *Strategy, nodes []*Node, timeout time.Duration, op Op[T], settled func([]Reply[T]) time.Duration) []Reply[T] {
	if len(nodes) == 1 {
		return []Reply[T]{inline(ctx, s, nodes[0], timeout, op)}
	}
	parent, start := ctx, time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type answer struct {
		i    int
		val  T
		sent transport.Sent
		err  error
	}
	ch := make(chan answer, len(nodes))
	state := make([]atomic.Int32, len(nodes))
	done := make([]chan struct{}, len(nodes))
	for i, n := range nodes {
		// The call goes out only if Fanout still waits when the node's
		// transport sends it: Fanout knows so whether it was sent, even
		// when it stops waiting before the answer.
		claim := func() bool { return state[i].Load() == making || state[i].CompareAndSwap(waiting, making) }
		done[i] = make(chan struct{})
		s.workers.run(func() {
			defer close(done[i])
			cctx, ccancel := withTimeout(ctx, timeout)
			defer ccancel()
			v, sent, err := transport.Watch(cctx, n.Probe, probeAfter(timeout), func(ctx context.Context) (T, transport.Sent, error) {
				return transport.SendClaimed(ctx, n.Tr, claim, func(ctx context.Context, c transport.Conn) (T, error) { return op(ctx, n, c) })
			})
			ch <- answer{i, v, sent, err}
		})
	}

	out := make([]Reply[T], len(nodes))
	record := func(a answer) {
		out[a.i] = Reply[T]{Val: a.val, Sent: a.sent, In: true}
		if a.err != nil {
			out[a.i].Err = s.nodeErr(nodes[a.i], parent, timeout, a.err)
		}
	}
	got := 0
	var grace <-chan time.Time // set once settled gave the rest a grace
collect:
	for got < len(nodes) {
		select {
		case a := <-ch:
			record(a)
			got++
			if settled == nil {
				continue
			}
			switch d := settled(out); {
			case d == 0:
				break collect
			case d > 0 && grace == nil:
				t := time.NewTimer(d)
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			break collect
		case <-parent.Done():
			for { // keep the answers already in
				select {
				case a := <-ch:
					record(a)
				default:
					break collect
				}
			}
		}
	}
	for i := range out {
		if out[i].In {
			continue
		}
		out[i].Sent, out[i].Done = transport.MayHaveRun, done[i]
		if state[i].CompareAndSwap(waiting, dropped) {
			out[i].Sent, out[i].Done = transport.NotSent, nil
		}
		var cause error
		if de := nodes[i].Probe.Since(start); de != nil {
			cause, out[i].Sent = de, transport.NotSent // refused: it never got a connection
		}
		if parent.Err() == nil {
			out[i].Err = ErrNotAwaited // settled early
		} else {
			out[i].Err = s.nodeErr(nodes[i], parent, timeout, cause)
		}
	}
	return out
}

// inline is Fanout's call to one node, on the caller's goroutine.
func inline[T any](ctx context.Context, s *Strategy, n *Node, timeout time.Duration, op Op[T]) Reply[T] {
	send := func(ctx context.Context) (T, transport.Sent, error) {
		return transport.Send(ctx, n.Tr, func(ctx context.Context, c transport.Conn) (T, error) { return op(ctx, n, c) })
	}
	if timeout <= 0 {
		// One Redis: the call ends with the caller's context, and only a
		// try's error names a refused dial (tryOne).
		v, sent, err := send(ctx)
		return Reply[T]{Val: v, Sent: sent, Err: err, In: true}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, sent, err := transport.Watch(cctx, n.Probe, probeAfter(timeout), send)
	r := Reply[T]{Val: v, Sent: sent, In: true}
	if err != nil {
		r.Err = s.nodeErr(n, ctx, timeout, err)
	}
	return r
}

// withTimeout is ctx bounded by timeout, or ctx itself when timeout is 0.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// probeAfter is how long a call runs before its node is probed: half the
// node timeout, at most transport.ProbeAfter.
func probeAfter(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return transport.ProbeAfter
	}
	return min(timeout/2, transport.ProbeAfter)
}

// nodeErr says why a call to n failed: the caller's context ended, the
// node did not answer within timeout (the per-node deadline passed, or the
// client's own timeout fired first), or (cause) its own error; wrapped by
// Config.NodeError. Without a node timeout, cause is the error.
func (s *Strategy) nodeErr(n *Node, parent context.Context, timeout time.Duration, cause error) error {
	var dial *transport.DialError
	var err error
	switch pe := lifetime.Ended(parent); {
	case timeout <= 0 && cause != nil:
		err = cause // the caller's own bound: its error says it
	case pe != nil && errors.As(cause, &dial):
		err = transport.Named(pe, dial)
	case pe != nil && cause != nil && !errors.Is(cause, pe):
		err = sentinel.Join(pe, cause)
	case pe != nil:
		err = pe
	case timeout > 0 && (cause == nil || errors.Is(cause, context.DeadlineExceeded) || isTimeout(cause)):
		err = s.cfg.nodeTimeout(timeout, cause)
	default:
		err = cause
	}
	if s.cfg.NodeError == nil {
		return err
	}
	return s.cfg.NodeError(n.Addr, err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// ErrNotAwaited marks the reply of a node that Fanout stopped waiting for
// because the outcome was already settled. It is not known to have
// failed, and not known to have answered either: a try counts it among
// the nodes that cannot make a majority.
var ErrNotAwaited = errors.New("quorum: answer not awaited")

// Failed returns the errors of the nodes that failed, joined on one line,
// or nil.
func Failed[T any](rs []Reply[T]) error {
	var errs []error
	for _, r := range rs {
		if r.Err != nil && r.Err != ErrNotAwaited {
			errs = append(errs, r.Err)
		}
	}
	return sentinel.Join(errs...)
}

// settle returns op, sent only once the node's pipelines in flight have
// ended (transport.Transport.Settle): op undoes a call that may still be in
// one, not yet written, and would overtake it on another connection.
func settle[T any](op Op[T]) Op[T] {
	return func(ctx context.Context, n *Node, c transport.Conn) (T, error) {
		if err := n.Tr.Settle(ctx); err != nil {
			var zero T
			return zero, err // not sent
		}
		return op(ctx, n, c)
	}
}
