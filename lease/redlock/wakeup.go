package redlock

import (
	"context"
	"math/rand/v2"
	"time"
)

// wakeup listens on a lock's release channel on every node. Each message is
// reported as the index of the node that published it.
type wakeup struct {
	c      chan int
	cancel context.CancelFunc
}

// subscribe starts one subscriber per node. Each runs in its own goroutine,
// so a node that is down or paused delays nothing; close stops them all.
func subscribe(ctx context.Context, nodes []node, channel string) *wakeup {
	ctx, cancel := context.WithCancel(ctx)
	w := &wakeup{c: make(chan int, 2*len(nodes)), cancel: cancel}
	for i, n := range nodes {
		go w.listen(ctx, i, n, channel)
	}
	return w
}

func (w *wakeup) listen(ctx context.Context, i int, n node, channel string) {
	ps := n.rdb.Subscribe(ctx, channel)
	defer ps.Close()
	msgs := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-msgs:
			if !ok {
				return
			}
			select {
			case w.c <- i:
			default: // the waiter has plenty to wake up for already
			}
		}
	}
}

// close stops the subscribers. It does not wait: a subscriber still
// connecting to a stalled node ends when its connect or handshake returns.
func (w *wakeup) close() {
	if w != nil {
		w.cancel()
	}
}

// drain drops the messages received so far: the attempt about to be made
// sees their effect anyway.
func (w *wakeup) drain() {
	if w == nil {
		return
	}
	for {
		select {
		case <-w.c:
		default:
			return
		}
	}
}

// maxWakeJitter caps the random delay after a release message.
const maxWakeJitter = 2 * time.Millisecond

// wait blocks for d, or until a node in watch publishes a release (then for
// a random extra up to jitter, so that the woken waiters do not all collide;
// woken is then true), or until ctx ends, which it returns as ctx.Err().
// Releases from the other nodes are ignored: they are the failed attempt's
// own releases, on the nodes that had granted it. w may be nil: then only d
// and ctx count.
func (w *wakeup) wait(ctx context.Context, d, jitter time.Duration, watch []bool) (woken bool, err error) {
	var wake <-chan int
	if w != nil {
		wake = w.c
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for !woken {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
			return false, nil
		case i := <-wake:
			woken = watch[i]
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
