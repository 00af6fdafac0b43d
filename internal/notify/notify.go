// Package notify is the pub/sub side of waiting for a lock: one connection
// per Redis node that a lock client shares among all its waiting acquires,
// used by both the lease and redlock (one [Notifier] per node).
//
// A channel is subscribed while at least one local waiter wants it, and a
// connection is closed when no waiter has wanted any of its channels for a
// second. A release message wakes one waiter, not all: a fair handoff
// ("holder:seq") the waiter it names, a plain release ("") the
// longest-waiting local waiter of that channel.
//
// On a Redis Cluster whose servers have sharded pub/sub (Redis 7 and
// later), waiters use SSUBSCRIBE on the node that serves the channel's slot
// (one connection per such node, at most), and the release script uses
// SPUBLISH (see package script), so a release message travels to one shard
// instead of the whole cluster bus. Other clients, and clusters without
// sharded pub/sub, use classic SUBSCRIBE and PUBLISH.
//
// Wake-ups are an optimisation, never a condition of progress: while a
// subscription is down or not yet confirmed, a waiter still wakes on its own
// timers (the holder's ttl, its backoff), so a lost message costs time.
package notify

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
)

// Notifier is one lock client's pub/sub on one Redis deployment. The zero
// value is not usable; see [New]. It is safe for concurrent use.
type Notifier struct {
	rdb redis.UniversalClient

	detect chan struct{} // buffered 1: serialises the sharded pub/sub detection (I/O), waited for under ctx
	mu     sync.Mutex
	mode   protocol.PubSub
	conns  map[string]*conn // by node address; "" for classic pub/sub
}

// New returns a Notifier on rdb. It does no I/O: a connection opens when
// the first waiter registers.
//
// A *redis.Ring, whose pub/sub connections each serve the shard of their
// first channel, gets no pub/sub at all: its waiters wake by the holder's
// ttl and their backoff (see protocol.PubSub).
func New(rdb redis.UniversalClient) *Notifier {
	return &Notifier{rdb: rdb, conns: map[string]*conn{}, mode: protocol.PubSubFor(rdb), detect: make(chan struct{}, 1)}
}

// PubSub returns how release messages travel, as far as the notifier knows
// yet: the releasing side publishes by it too, so that both sides follow
// one decision.
func (n *Notifier) PubSub() protocol.PubSub {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mode
}

// Sharded reports whether the notifier uses sharded pub/sub; false also
// while that is not known yet (before the first waiter on a cluster).
func (n *Notifier) Sharded() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mode == protocol.PubSubSharded
}

// Conns returns how many pub/sub connections the notifier has open or
// opening, for tests and metrics.
func (n *Notifier) Conns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	open := 0
	for _, c := range n.conns {
		c.mu.Lock()
		if c.ps != nil {
			open++
		}
		c.mu.Unlock()
	}
	return open
}

// Waiter is one waiting acquire's registration on a channel.
type Waiter struct {
	channel string
	holder  string
	wake    chan Wakeup // buffered 1: a wake-up not yet consumed is enough
	ready   <-chan struct{}
	conn    *conn // nil when no subscription could be made
}

// Wakeup is a release message for one waiter.
type Wakeup struct {
	Msg protocol.Message
	At  time.Time // when the dispatcher read it
}

// Wake delivers the waiter's wake-ups.
func (w *Waiter) Wake() <-chan Wakeup { return w.wake }

// Join registers a waiter for channel only if the channel is subscribed and
// confirmed already (other local waiters listen to it), which costs no I/O;
// nil otherwise.
func (n *Notifier) Join(channel, holder string) *Waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		if w := c.join(channel, holder); w != nil {
			return w
		}
	}
	return nil
}

// Register adds a waiter for channel under holder id and subscribes the
// channel if no local waiter had it. It does not wait for the subscription
// (see [Waiter.WaitReady]). On a cluster, the first call asks the servers
// whether they have sharded pub/sub, and each call looks up the channel's
// node, which may cost I/O bounded by ctx; when that fails the waiter gets
// no wake-ups, only its own timers.
func (n *Notifier) Register(ctx context.Context, channel, holder string) *Waiter {
	key, err := n.route(ctx, channel)
	if err != nil || n.PubSub() == protocol.PubSubNone {
		return unsubscribed(channel, holder)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.conns[key]
	if c == nil {
		c = &conn{rdb: n.rdb, sharded: n.mode == protocol.PubSubSharded}
		n.conns[key] = c
	}
	return c.register(channel, holder)
}

// unsubscribed is a waiter on no connection: it never wakes and is ready at
// once, so its acquire goes on with its timers alone.
func unsubscribed(channel, holder string) *Waiter {
	ready := make(chan struct{})
	close(ready)
	return &Waiter{channel: channel, holder: holder, wake: make(chan Wakeup, 1), ready: ready}
}

// route returns the key of the connection that channel belongs on: "" for
// classic pub/sub, the address of the channel's slot master for sharded.
func (n *Notifier) route(ctx context.Context, channel string) (string, error) {
	m, err := n.detectMode(ctx)
	if err != nil || m != protocol.PubSubSharded {
		return "", err
	}
	node, err := n.rdb.(*redis.ClusterClient).MasterForKey(ctx, channel)
	if err != nil {
		return "", err
	}
	return node.Options().Addr, nil
}

// detectMode asks a cluster, once, whether it has sharded pub/sub. A
// failure is not remembered: the next waiter asks again.
func (n *Notifier) detectMode(ctx context.Context) (protocol.PubSub, error) {
	if m := n.PubSub(); m != protocol.PubSubUnknown {
		return m, nil
	}
	select {
	case n.detect <- struct{}{}:
	case <-ctx.Done():
		return protocol.PubSubUnknown, ctx.Err()
	}
	defer func() { <-n.detect }()
	if m := n.PubSub(); m != protocol.PubSubUnknown {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	m, err := protocol.DetectPubSub(ctx, n.rdb)
	if err != nil {
		return m, err
	}
	n.mu.Lock()
	n.mode = m
	n.mu.Unlock()
	return m, nil
}

// Unregister removes w; the last local waiter of a channel unsubscribes it,
// and the last of all on a connection starts the linger before it closes.
// A nil w is ignored.
func (n *Notifier) Unregister(w *Waiter) {
	if w != nil && w.conn != nil {
		w.conn.unregister(w)
	}
}

// Drain drops a wake-up pending for w, if any: the caller's next try sees
// the release it announced anyway, and Unregister must not pass it on to
// another waiter, who would try in vain. A nil w is ignored.
func (w *Waiter) Drain() {
	if w == nil {
		return
	}
	select {
	case <-w.wake:
	default:
	}
}

// Ready reports whether the waiter's subscription is confirmed.
func (w *Waiter) Ready() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// readyWait bounds how long a waiter waits for its subscription to be
// confirmed before it goes on with its timers alone.
const readyWait = 200 * time.Millisecond

// WaitReady waits until the waiter's subscription is confirmed, for at most
// 200ms, or until ctx ends or a wake-up arrives (which it leaves for the
// caller to read).
func (w *Waiter) WaitReady(ctx context.Context) {
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
	case <-ctx.Done():
	case u := <-w.wake:
		w.putBack(u)
	}
}

// putBack returns a wake-up that WaitReady took: a handoff replaces
// whatever came meanwhile, a plain wake-up yields to it.
func (w *Waiter) putBack(u Wakeup) {
	if u.Msg.Handoff {
		replace(w.wake, u)
		return
	}
	select {
	case w.wake <- u:
	default:
	}
}

// replace puts u in ch, dropping a wake-up still pending there: a handoff
// must not be lost behind a plain one.
func replace(ch chan Wakeup, u Wakeup) {
	for {
		select {
		case ch <- u:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}
