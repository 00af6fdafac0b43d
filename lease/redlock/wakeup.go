package redlock

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/quorum"
)

// wakeup is a waiting Acquire's registration on a lock's release channel on
// every node, through the node's shared pub/sub connection: a release wakes
// one local waiter per node. Without WithWakeup only its timers wake it.
type wakeup struct {
	a  *quorum.Attempt
	ws []*notify.Waiter // in node order; nil without WithWakeup
}

// listen registers a waiter for the lock's channel on every node and waits,
// for at most 200ms in all, for the subscriptions, so that the attempt that
// follows cannot miss a release.
func listen(ctx context.Context, a *quorum.Attempt) family.Waker {
	nodes := a.Strategy().Nodes()
	w := &wakeup{a: a, ws: make([]*notify.Waiter, len(nodes))}
	for i, n := range nodes {
		w.ws[i] = n.Notify.Register(ctx, a.Keys().Channel, "")
	}
	ready, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	for _, x := range w.ws {
		x.WaitReady(ready)
	}
	return w
}

// readyWait bounds the wait for the subscriptions' confirmations.
const readyWait = 200 * time.Millisecond

// maxWakeJitter caps the random delay after a release message.
const maxWakeJitter = 2 * time.Millisecond

func (w *wakeup) Close() {
	for i, x := range w.ws {
		w.a.Strategy().Nodes()[i].Notify.Unregister(x)
	}
}

// BeforeTry drops the wake-ups received so far: the next try sees them.
func (w *wakeup) BeforeTry() {
	for _, x := range w.ws {
		x.Drain()
	}
}

// Got drops the wake-ups that came during the try that got the lock:
// closing must not pass them on to the next waiter.
func (w *wakeup) Got() { w.BeforeTry() }

// Wait blocks for d, or until a node the last attempt found busy publishes
// a release (then for a random extra of up to the minimum backoff, capped
// at 2ms, so that the woken waiters of several clients do not all collide),
// or until ctx ends. Releases from the other nodes are the failed attempt's
// own, on the nodes that had granted it, and are ignored.
func (w *wakeup) Wait(ctx context.Context, d time.Duration, _ family.Miss) (*family.Grant, bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	// The number of nodes is known only at run time: select by reflection
	// over ctx, the timer and one wake-up channel per node.
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
	}
	for _, x := range w.ws {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(x.Wake())})
	}
	for woken := false; !woken; {
		switch i, _, _ := reflect.Select(cases); i {
		case 0:
			return nil, false, ctx.Err()
		case 1:
			return nil, false, nil
		default:
			woken = w.a.Busy(i - 2)
		}
	}
	t.Reset(rand.N(min(w.a.Strategy().MinBackoff(), maxWakeJitter) + 1))
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-t.C:
		return nil, true, nil
	}
}
