package redlock

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/fencelock/fencelock/internal/notify"
)

// wakeup is a waiting Acquire's registration on a lock's release channel on
// every node, through the node's pub/sub connection that all the client's
// waiters share (see package notify): a release wakes one local waiter per
// node, not all of them.
type wakeup struct {
	c  *Client
	ws []*notify.Waiter // in node order
}

// listen registers a waiter for channel on every node and waits, for at
// most 200ms in all, until the nodes confirmed the subscriptions, so that
// the attempt that follows cannot miss a release. A node that is down or
// paused delays it by no more than that; its waiter then wakes on the
// timers alone.
func (c *Client) listen(ctx context.Context, channel string) *wakeup {
	w := &wakeup{c: c, ws: make([]*notify.Waiter, len(c.nodes))}
	for i, n := range c.notify {
		w.ws[i] = n.Register(ctx, channel, "")
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

// close unregisters the waiters: a node's last waiter of the channel
// unsubscribes it.
func (w *wakeup) close() {
	if w == nil {
		return
	}
	for i, x := range w.ws {
		w.c.notify[i].Unregister(x)
	}
}

// drain drops the wake-ups received so far: the attempt about to be made
// sees their effect anyway.
func (w *wakeup) drain() {
	if w == nil {
		return
	}
	for _, x := range w.ws {
		x.Drain()
	}
}

// maxWakeJitter caps the random delay after a release message.
const maxWakeJitter = 2 * time.Millisecond

// wait blocks for d, or until a node in watch publishes a release (then for
// a random extra up to jitter, so that the woken waiters of several clients
// do not all collide; woken is then true), or until ctx ends, which it
// returns as ctx.Err(). Releases from the other nodes are ignored: they are
// the failed attempt's own releases, on the nodes that had granted it. w may
// be nil: then only d and ctx count.
func (w *wakeup) wait(ctx context.Context, d, jitter time.Duration, watch []bool) (woken bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	// The number of nodes is known only at run time: select by reflection
	// over ctx, the timer and one wake-up channel per node.
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
	}
	if w != nil {
		for _, x := range w.ws {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(x.Wake())})
		}
	}
	for !woken {
		switch i, _, _ := reflect.Select(cases); i {
		case 0:
			return false, ctx.Err()
		case 1:
			return false, nil
		default:
			woken = watch[i-2]
		}
	}
	// A couple of ms spread the woken waiters over more than a loopback round
	// trip, which is enough to avoid most split votes, without adding the
	// whole backoff to every hand-off.
	t.Reset(rand.N(min(jitter, maxWakeJitter) + 1))
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return true, nil
	}
}
