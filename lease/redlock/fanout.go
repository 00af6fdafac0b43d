package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/sentinel"
)

// node is one independent Redis master.
type node struct {
	addr   string
	rdb    redis.UniversalClient
	notify *notify.Notifier // its waiters' pub/sub, whose mode its releases follow
	probe  *family.Prober   // tells a node that refuses connections from a slow one
	// tr batches the concurrent calls to the node into pipelines (at most
	// two in flight), so a burst of waiters costs a few round trips
	// instead of queueing for go-redis's pool; it says what each sent.
	tr *family.Transport
	// workers are the client's, which run its fan-out calls.
	workers *workers
}

func newNode(addr string, rdb redis.UniversalClient, w *workers) node {
	return node{addr: addr, rdb: rdb, notify: notify.New(rdb), probe: family.NewProber(rdb), tr: family.NewTransport(rdb, true), workers: w}
}

// workers run one client's fan-out calls. A worker goroutine outlives one
// call and waits up to workerIdle for the next, so the stacks that
// go-redis's deep call path grows are reused instead of grown again for
// every node of every call; idle workers exit. One set per client, shared
// by its nodes.
type workers struct{ tasks chan func() }

const workerIdle = time.Second

func newWorkers() *workers { return &workers{tasks: make(chan func())} }

// run hands f to an idle worker, or starts one.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		}
	}
}

// reply is one node's answer to a fanned-out call. err is nil when the node
// answered val, else a *NodeError. sent says what the call did: a call that
// fanout stopped waiting for was either never made (NotSent) or is in
// flight (MayHaveRun). in reports whether the node's answer arrived.
type reply[T any] struct {
	val  T
	err  error
	sent family.Sent
	in   bool
	// done, for a call still in flight when fanout returned, closes when
	// it returns here; nil otherwise.
	done <-chan struct{}
}

// call states of one node's call in fanout.
const (
	waiting int32 = iota // not sent yet (not started, or queued in the node's transport)
	making               // sent, or being sent: it may run
	dropped              // fanout stopped waiting first: it will not be sent
)

// fanout calls op on every node at once, through the node's transport, and
// collects the answers. Each call runs under ctx and a deadline timeout
// away; fanout returns when every node has answered, when ctx
// ends, or as soon as settled (if not nil) reports, given the replies so
// far, that the outcome cannot change. Replies not in by then carry a
// *NodeError wrapping ErrNodeTimeout, or ctx.Err() when the caller's
// context ended, or errNotAwaited when settled ended the wait; and whether
// their call was made, as a value. A node that refused a direct dial
// meanwhile is named in its error, and its call was not sent.
//
// The calls still running are cancelled and left to finish on their own
// goroutines; they send into a buffered channel, so they never block.
func fanout[T any](ctx context.Context, nodes []node, timeout time.Duration,
	op func(context.Context, node, family.Conn) (T, error), settled func([]reply[T]) bool,
) []reply[T] {
	parent, start := ctx, time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type answer struct {
		i    int
		val  T
		sent family.Sent
		err  error
	}
	ch := make(chan answer, len(nodes))
	state := make([]atomic.Int32, len(nodes))
	done := make([]chan struct{}, len(nodes))
	for i, n := range nodes {
		// The call goes out only if fanout still waits when the node's
		// transport sends it: fanout knows so whether it was sent, even
		// when it stops waiting before the answer.
		claim := func() bool { return state[i].Load() == making || state[i].CompareAndSwap(waiting, making) }
		done[i] = make(chan struct{})
		n.workers.run(func() {
			defer close(done[i])
			cctx, ccancel := context.WithTimeout(ctx, timeout)
			defer ccancel()
			v, sent, err := family.Watch(cctx, n.probe, min(timeout/2, family.ProbeAfter), func(ctx context.Context) (T, family.Sent, error) {
				return family.SendClaimed(ctx, n.tr, claim, func(ctx context.Context, c family.Conn) (T, error) { return op(ctx, n, c) })
			})
			ch <- answer{i, v, sent, err}
		})
	}

	out := make([]reply[T], len(nodes))
	record := func(a answer) {
		out[a.i] = reply[T]{val: a.val, sent: a.sent, in: true}
		if a.err != nil {
			out[a.i].err = &NodeError{Addr: nodes[a.i].addr, Err: nodeErr(parent, timeout, a.err)}
		}
	}
	got := 0
collect:
	for got < len(nodes) {
		select {
		case a := <-ch:
			record(a)
			got++
			if settled != nil && settled(out) {
				break collect
			}
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
		if out[i].in {
			continue
		}
		out[i].sent, out[i].done = family.MayHaveRun, done[i]
		if state[i].CompareAndSwap(waiting, dropped) {
			out[i].sent, out[i].done = family.NotSent, nil
		}
		var cause error
		if de := nodes[i].probe.Since(start); de != nil {
			cause, out[i].sent = de, family.NotSent // refused: it never got a connection
		}
		if parent.Err() == nil {
			out[i].err = errNotAwaited // settled early
		} else {
			out[i].err = &NodeError{Addr: nodes[i].addr, Err: nodeErr(parent, timeout, cause)}
		}
	}
	return out
}

// nodeErr says why a node failed: the caller's context ended, the node did
// not answer in time (the per-node deadline passed, or the client's own
// timeout fired first), or (cause) its own error.
func nodeErr(parent context.Context, timeout time.Duration, cause error) error {
	var dial *family.DialError
	switch pe := lifetime.Ended(parent); {
	case pe != nil && errors.As(cause, &dial):
		return family.Named(pe, dial)
	case pe != nil:
		if cause != nil && !errors.Is(cause, pe) {
			return sentinel.Join(pe, cause)
		}
		return pe
	case cause == nil, errors.Is(cause, context.DeadlineExceeded), isTimeout(cause):
		return nodeTimeout(timeout, cause)
	}
	return cause
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// errNotAwaited marks the reply of a node that fanout stopped waiting for
// because the outcome was already settled. It is not a failure of the node.
var errNotAwaited = errors.New("redlock: answer not awaited")

// failed returns the errors of the nodes that failed, joined on one line,
// or nil.
func failed[T any](rs []reply[T]) error {
	var errs []error
	for _, r := range rs {
		if r.err != nil && r.err != errNotAwaited {
			errs = append(errs, r.err)
		}
	}
	return sentinel.Join(errs...)
}

// settled returns op, sent only once the node's pipelines in flight have
// ended (family.Transport.Settle): op undoes a call that may still be in
// one, not yet written, and would overtake it on another connection.
func settled[T any](op func(context.Context, node, family.Conn) (T, error)) func(context.Context, node, family.Conn) (T, error) {
	return func(ctx context.Context, n node, c family.Conn) (T, error) {
		if err := n.tr.Settle(ctx); err != nil {
			var zero T
			return zero, err // not sent
		}
		return op(ctx, n, c)
	}
}
