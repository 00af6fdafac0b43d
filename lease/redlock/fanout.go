package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/batch"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
)

// node is one independent Redis master.
type node struct {
	addr string
	// rdb is batch: the node's client with its script calls batched.
	rdb    redis.UniversalClient
	batch  *batch.Client
	notify *notify.Notifier // its waiters' pub/sub, whose mode its releases follow
	dials  *family.Dials    // its last failed dial, named when it did not answer
}

// named adds to a node's error of time (the node timeout or the caller's
// context) the node's last failed dial since start.
func (n node) named(err error, start time.Time) error {
	if errors.Is(err, ErrNodeTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return n.dials.Name(err, start)
	}
	return err
}

// reply is one node's answer to a fanned-out call. err is nil when the node
// answered val, else a *NodeError. in reports whether the node's answer (val
// or its own error) arrived; it is false for a node fanout stopped waiting for.
type reply[T any] struct {
	val T
	err error
	in  bool
}

// fanout calls op on every node at once and collects the answers. Each call
// runs under ctx and a deadline timeout away; fanout returns when every node
// has answered, when that deadline or ctx ends, or as soon as settled (if not
// nil) reports, given the replies so far, that the outcome cannot change.
// Replies not in by then carry a *NodeError wrapping ErrNodeTimeout, or
// ctx.Err() when the caller's context ended, or errNotAwaited when settled
// ended the wait. When a node's batch had not sent its call by then (a
// batch.Tracker per node says so), the call never goes out and the error
// wraps batch.ErrNotSent too: the call surely did not run.
//
// The calls that are still running are cancelled and left to finish on their
// own; they send into a buffered channel, so they never block and always end
// (when the redis client honours contexts, at once; otherwise at its
// ReadTimeout). Nothing waits for them.
func fanout[T any](ctx context.Context, nodes []node, timeout time.Duration,
	op func(context.Context, node) (T, error), settled func([]reply[T]) bool,
) []reply[T] {
	parent, start := ctx, time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	type answer struct {
		i   int
		val T
		err error
	}
	ch := make(chan answer, len(nodes))
	sent := make([]*batch.Tracker, len(nodes))
	for i, n := range nodes {
		var nctx context.Context
		nctx, sent[i] = batch.Track(ctx)
		workers.run(func() {
			v, err := op(nctx, n)
			ch <- answer{i, v, err}
		})
	}

	out := make([]reply[T], len(nodes))
	record := func(a answer) {
		out[a.i] = reply[T]{val: a.val, in: true}
		if a.err != nil {
			out[a.i].err = &NodeError{Addr: nodes[a.i].addr, Err: nodes[a.i].named(nodeErr(parent, ctx, timeout, a.err), start)}
		}
	}
collect:
	for range nodes {
		select {
		case a := <-ch:
			record(a)
			if settled != nil && settled(out) {
				break collect
			}
		case <-ctx.Done():
			// The answers already sent are kept: a call that ended with
			// the deadline may say that it never went out (batch).
			for {
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
		switch {
		case out[i].in:
		case ctx.Err() == nil:
			out[i].err = errNotAwaited // settled early
		default:
			// The node's batch says whether its call went out, and from
			// now on it will not: one that did not surely did not run.
			var cause error
			if !sent[i].Seal() {
				cause = batch.ErrNotSent
			}
			out[i].err = &NodeError{Addr: nodes[i].addr, Err: nodes[i].named(nodeErr(parent, ctx, timeout, cause), start)}
		}
	}
	return out
}

// nodeErr says why a node failed: the caller's context ended, the node did
// not answer in time (the per-node deadline passed, or the client's own
// timeout fired first), or (cause) its own error.
func nodeErr(parent, ctx context.Context, timeout time.Duration, cause error) error {
	switch pe := lifetime.Ended(parent); {
	case pe != nil && errors.Is(cause, batch.ErrNotSent):
		return fmt.Errorf("%w: %w", pe, batch.ErrNotSent) // and the call never went out
	case pe != nil:
		if cause != nil && !errors.Is(cause, pe) {
			return errors.Join(pe, cause)
		}
		return pe
	case cause == nil, errors.Is(cause, context.DeadlineExceeded), errors.Is(cause, batch.ErrNotSent), isTimeout(cause):
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

// failed returns the errors of the nodes that failed, joined, or nil.
func failed[T any](rs []reply[T]) error {
	var errs []error
	for _, r := range rs {
		if r.err != nil && r.err != errNotAwaited {
			errs = append(errs, r.err)
		}
	}
	return errors.Join(errs...)
}

// workers runs fanout's calls. A worker goroutine outlives one call and
// waits up to workerIdle for the next, so the stacks that go-redis's deep
// call path grows are reused instead of grown again for every node of every
// call (that growth was a fifth of the client's CPU time in an uncontended
// acquire+release). Idle workers exit; nothing needs closing.
var workers = &workerPool{tasks: make(chan func())}

const workerIdle = time.Second

type workerPool struct{ tasks chan func() }

// run hands f to an idle worker, or starts one.
func (w *workerPool) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		go w.loop(f)
	}
}

func (w *workerPool) loop(f func()) {
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
