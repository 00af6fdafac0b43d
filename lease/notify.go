package lease

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier is a Client's one pub/sub connection, shared by all its waiting
// Acquire calls: a channel is subscribed while at least one local waiter
// wants it, and the connection is closed when no waiter has wanted any
// channel for notifierLinger. A release message wakes one waiter, not all:
// a fair handoff ("holder:seq") the waiter it names, a plain release ("")
// the longest-waiting local waiter for that lock.
//
// go-redis reconnects a broken pub/sub connection and subscribes its
// channels again; while it is down, waiters still wake on their own timers
// (the holder's ttl, their backoff), so a lost message costs time, not
// progress.
type notifier struct {
	rdb redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub
	kick   chan struct{} // buffered 1: the wanted channels changed
	done   chan struct{} // closed when ps is closed
	chans  map[string]*subscribers
	linger *time.Timer // closes ps when no channel is wanted
	// live are the channels the server confirmed and that no UNSUBSCRIBE
	// has been decided for: a waiter that wants one again is listening at
	// once. dropping are those with an UNSUBSCRIBE not yet confirmed: a
	// late "subscribe" reply for them says nothing about the future.
	live, dropping map[string]bool
}

// notifierLinger is how long the pub/sub connection stays open with no
// waiter, so that a busy lock does not open and close it over and over.
const notifierLinger = time.Second

// readyWait bounds how long a waiter waits for its subscription to be
// confirmed before it goes on with its timers alone.
const readyWait = 200 * time.Millisecond

// subscribers are the local waiters of one channel, in arrival order.
type subscribers struct {
	waiters []*waiter
	ready   chan struct{} // closed when the server confirmed the subscription
}

// waiter is one waiting Acquire.
type waiter struct {
	channel string
	holder  string
	wake    chan wakeup // buffered 1: a wake-up not yet consumed is enough
	ready   <-chan struct{}
}

// wakeup is a release message for one waiter.
type wakeup struct {
	payload string    // "" (a plain release) or "holder:seq" (a handoff to holder)
	at      time.Time // when the dispatcher read it
}

// join registers a waiter for channel only if the channel is subscribed and
// confirmed already (other local waiters listen to it), which costs no I/O;
// nil otherwise.
func (n *notifier) join(channel, holder string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.live[channel] || n.chans[channel] == nil || n.ps == nil {
		return nil
	}
	return n.registerLocked(channel, holder)
}

// register adds a waiter for channel under holder id and subscribes the
// channel if no local waiter had it. It does not wait for the
// subscription: see waitReady.
func (n *notifier) register(channel, holder string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.registerLocked(channel, holder)
}

func (n *notifier) registerLocked(channel, holder string) *waiter {
	w := &waiter{channel: channel, holder: holder, wake: make(chan wakeup, 1)}
	if n.linger != nil {
		n.linger.Stop()
		n.linger = nil
	}
	if n.chans == nil {
		n.chans, n.live, n.dropping = map[string]*subscribers{}, map[string]bool{}, map[string]bool{}
	}
	s := n.chans[channel]
	if s == nil {
		s = &subscribers{ready: make(chan struct{})}
		if n.live[channel] && n.ps != nil { // wanted again before the writer dropped it
			close(s.ready)
		}
		n.chans[channel] = s
		n.changed()
	}
	s.waiters = append(s.waiters, w)
	w.ready = s.ready
	return w
}

// changed tells the connection's writer that the wanted channels changed,
// opening the connection (no I/O yet), its dispatcher and its writer first
// if needed. Called with n.mu held: it does no I/O itself.
func (n *notifier) changed() {
	if n.ps == nil {
		n.ps = n.rdb.Subscribe(context.Background()) // no channel: no I/O
		n.kick, n.done = make(chan struct{}, 1), make(chan struct{})
		go n.dispatch(n.ps)
		go n.write(n.ps, n.kick, n.done)
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// write makes the server's subscriptions follow the wanted channels, one
// SUBSCRIBE or UNSUBSCRIBE at a time, each bounded. go-redis remembers the
// channels even when a write fails, and subscribes them again when it
// reconnects, so a failure needs no retry here.
func (n *notifier) write(ps *redis.PubSub, kick, done <-chan struct{}) {
	have := map[string]bool{}
	for {
		select {
		case <-done:
			return
		case <-kick:
		}
		n.mu.Lock()
		var add, drop []string
		for ch := range n.chans {
			if !have[ch] {
				add = append(add, ch)
			}
		}
		for ch := range have {
			if n.chans[ch] == nil {
				drop = append(drop, ch)
				delete(n.live, ch)
				n.dropping[ch] = true
			}
		}
		n.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		if len(add) > 0 {
			_ = ps.Subscribe(ctx, add...)
			for _, ch := range add {
				have[ch] = true
			}
		}
		if len(drop) > 0 {
			err := ps.Unsubscribe(ctx, drop...)
			n.mu.Lock()
			for _, ch := range drop {
				delete(have, ch)
				if err != nil { // no reply will come to clear it
					delete(n.dropping, ch)
				}
			}
			n.mu.Unlock()
		}
		cancel()
	}
}

// writeTimeout bounds each SUBSCRIBE or UNSUBSCRIBE.
const writeTimeout = time.Second

// isReady reports whether the waiter's subscription is confirmed.
func (w *waiter) isReady() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// waitReady waits until the waiter's subscription is confirmed, for at most
// readyWait, or until ctx ends or a wake-up arrives (which it leaves for the
// caller to read).
func (w *waiter) waitReady(ctx context.Context) {
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

// putBack returns a wake-up that waitReady took: a handoff replaces
// whatever came meanwhile, a plain wake-up yields to it.
func (w *waiter) putBack(u wakeup) {
	if strings.Contains(u.payload, ":") {
		replace(w.wake, u)
		return
	}
	select {
	case w.wake <- u:
	default:
	}
}

// unregister removes w; the last local waiter of a channel unsubscribes it,
// and the last of all starts the linger before the connection closes.
func (n *notifier) unregister(w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.chans[w.channel]
	if s == nil {
		return
	}
	s.waiters = slices.DeleteFunc(s.waiters, func(x *waiter) bool { return x == w })
	if len(s.waiters) > 0 {
		// A plain wake-up the leaving waiter did not use goes to the next
		// one: a release woke one waiter, and one must go and look.
		select {
		case u := <-w.wake:
			if u.payload == "" {
				for _, x := range s.waiters {
					select {
					case x.wake <- u:
						return
					default:
					}
				}
			}
		default:
		}
		return
	}
	delete(n.chans, w.channel)
	if n.ps != nil {
		n.changed()
	}
	if len(n.chans) == 0 && n.ps != nil {
		n.linger = time.AfterFunc(notifierLinger, n.closeIfIdle)
	}
}

// closeIfIdle closes the connection if still no channel is wanted. The
// close itself runs outside n.mu: it waits for go-redis's own lock, which a
// write or a reconnect may hold for a while.
func (n *notifier) closeIfIdle() {
	n.mu.Lock()
	if len(n.chans) > 0 || n.ps == nil {
		n.mu.Unlock()
		return
	}
	ps := n.ps
	close(n.done) // ends the writer
	n.ps, n.linger = nil, nil
	clear(n.live)
	clear(n.dropping)
	n.mu.Unlock()
	_ = ps.Close() // ends the dispatcher
}

// dispatch reads ps until it is closed and hands each message to one
// waiter.
func (n *notifier) dispatch(ps *redis.PubSub) {
	for m := range ps.ChannelWithSubscriptions() {
		switch m := m.(type) {
		case *redis.Subscription:
			n.subscription(ps, m)
		case *redis.Message:
			n.deliver(m.Channel, wakeup{payload: m.Payload, at: time.Now()})
		}
	}
}

// subscription records the server's confirmation of a SUBSCRIBE or an
// UNSUBSCRIBE on ps.
func (n *notifier) subscription(ps *redis.PubSub, m *redis.Subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ps != ps {
		return // a closed connection's last words
	}
	switch m.Kind {
	case "unsubscribe":
		delete(n.dropping, m.Channel)
	case "subscribe":
		if n.dropping[m.Channel] {
			return // an older SUBSCRIBE's reply: an UNSUBSCRIBE follows it
		}
		n.live[m.Channel] = true
		if s := n.chans[m.Channel]; s != nil {
			select {
			case <-s.ready:
			default:
				close(s.ready)
			}
		}
	}
}

// deliver wakes the waiter a handoff names, or else the first local waiter
// that has no wake-up pending.
func (n *notifier) deliver(channel string, u wakeup) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.chans[channel]
	if s == nil {
		return
	}
	if holder, _, ok := strings.Cut(u.payload, ":"); ok {
		for _, w := range s.waiters {
			if w.holder == holder {
				replace(w.wake, u)
				return
			}
		}
		return // handed to a waiter of another client
	}
	for _, w := range s.waiters {
		select {
		case w.wake <- u:
			return
		default:
		}
	}
}

// replace puts u in ch, dropping a wake-up still pending there: a handoff
// must not be lost behind a plain one.
func replace(ch chan wakeup, u wakeup) {
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
