package notify

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is one pub/sub connection of a Notifier and the local waiters of its
// channels: the only one for classic pub/sub, or one per shard node.
//
// For classic pub/sub, go-redis reconnects a broken connection and
// subscribes its channels again. A sharded connection cannot rely on that:
// go-redis sends all channels in one SSUBSCRIBE, which a cluster refuses
// (CROSSSLOT) when they span slots. So on any error a sharded connection is
// replaced by a new one, which subscribes its channels one at a time.
//
// Known limits of the sharded path: a slot that moves to another master
// (or a server's "sunsubscribe") leaves its waiters to their timers; any
// error reply replaces the whole connection; and the connection is not
// pinged, so a silently dead one is found only when it errors.
type conn struct {
	rdb     redis.UniversalClient
	sharded bool

	mu     sync.Mutex
	ps     *redis.PubSub
	kick   chan struct{} // buffered 1: the wanted channels changed
	done   chan struct{} // closed when ps is closed
	chans  map[string]*subscribers
	linger *time.Timer // closes ps when no channel is wanted
	// lingerGen tells a linger timer that fired from the current one: a
	// timer that fired as it was stopped must not close a later idle
	// connection before its own linger.
	lingerGen uint64
	// live are the channels the server confirmed and that no UNSUBSCRIBE
	// has been decided for: a waiter that wants one again is listening at
	// once. dropping are those with an UNSUBSCRIBE not yet confirmed: a
	// late "subscribe" reply for them says nothing about the future.
	live, dropping map[string]bool
}

// connLinger is how long a pub/sub connection stays open with no waiter,
// so that a busy lock does not open and close it over and over.
const connLinger = time.Second

// writeTimeout bounds each SUBSCRIBE or UNSUBSCRIBE.
const writeTimeout = time.Second

// restartPause spaces the replacements of a failing sharded connection.
const restartPause = 100 * time.Millisecond

// subscribers are the local waiters of one channel, in arrival order.
type subscribers struct {
	waiters []*Waiter
	ready   chan struct{} // closed when the server confirmed the subscription
}

// join registers a waiter for channel if the channel is live; nil otherwise.
func (c *conn) join(channel, holder string) *Waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live[channel] || c.chans[channel] == nil || c.ps == nil {
		return nil
	}
	return c.registerLocked(channel, holder)
}

func (c *conn) register(channel, holder string) *Waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.registerLocked(channel, holder)
}

func (c *conn) registerLocked(channel, holder string) *Waiter {
	w := &Waiter{channel: channel, holder: holder, wake: make(chan Wakeup, 1), conn: c}
	if c.linger != nil {
		c.linger.Stop()
		c.linger = nil
	}
	if c.chans == nil {
		c.chans, c.live, c.dropping = map[string]*subscribers{}, map[string]bool{}, map[string]bool{}
	}
	s := c.chans[channel]
	if s == nil {
		s = &subscribers{ready: make(chan struct{})}
		if c.live[channel] && c.ps != nil { // wanted again before the writer dropped it
			close(s.ready)
		}
		c.chans[channel] = s
		c.changed()
	}
	s.waiters = append(s.waiters, w)
	w.ready = s.ready
	return w
}

// changed tells the connection's writer that the wanted channels changed,
// opening the connection (no I/O yet), its dispatcher and its writer first
// if needed. Called with c.mu held: it does no I/O itself.
func (c *conn) changed() {
	if c.ps == nil {
		c.kick, c.done = make(chan struct{}, 1), make(chan struct{})
		if c.sharded {
			// The connection goes to the node of the first channel it
			// subscribes: the writer starts the dispatcher after that.
			c.ps = c.rdb.(*redis.ClusterClient).SSubscribe(context.Background())
		} else {
			c.ps = c.rdb.Subscribe(context.Background()) // no channel yet
			go c.dispatch(c.ps)
		}
		go c.write(c.ps, c.kick, c.done)
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// write makes the server's subscriptions follow the wanted channels, each
// SUBSCRIBE or UNSUBSCRIBE bounded (sharded: one channel per command, since
// the channels may be in different slots). go-redis remembers the channels
// even when a write fails, and subscribes them again when it reconnects, so
// a failure needs no retry here.
func (c *conn) write(ps *redis.PubSub, kick, done <-chan struct{}) {
	have := map[string]bool{}
	reading := !c.sharded
	for {
		select {
		case <-done:
			return
		case <-kick:
		}
		c.mu.Lock()
		var add, drop []string
		for ch := range c.chans {
			if !have[ch] {
				add = append(add, ch)
			}
		}
		for ch := range have {
			if c.chans[ch] == nil {
				drop = append(drop, ch)
				delete(c.live, ch)
				c.dropping[ch] = true
			}
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		if len(add) > 0 {
			c.subscribe(ctx, ps, add)
			for _, ch := range add {
				have[ch] = true
			}
			if !reading {
				reading = true
				go c.receive(ps)
			}
		}
		if len(drop) > 0 {
			err := c.unsubscribe(ctx, ps, drop)
			c.mu.Lock()
			for _, ch := range drop {
				delete(have, ch)
				if err != nil { // no reply will come to clear it
					delete(c.dropping, ch)
				}
			}
			c.mu.Unlock()
		}
		cancel()
	}
}

func (c *conn) subscribe(ctx context.Context, ps *redis.PubSub, chs []string) {
	if !c.sharded {
		_ = ps.Subscribe(ctx, chs...)
		return
	}
	for _, ch := range chs {
		_ = ps.SSubscribe(ctx, ch)
	}
}

func (c *conn) unsubscribe(ctx context.Context, ps *redis.PubSub, chs []string) error {
	if !c.sharded {
		return ps.Unsubscribe(ctx, chs...)
	}
	var errs []error
	for _, ch := range chs {
		errs = append(errs, ps.SUnsubscribe(ctx, ch))
	}
	return errors.Join(errs...)
}

// unregister removes w; the last local waiter of a channel unsubscribes it,
// and the last of all starts the linger before the connection closes.
func (c *conn) unregister(w *Waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.chans[w.channel]
	if s == nil {
		return
	}
	s.waiters = slices.DeleteFunc(s.waiters, func(x *Waiter) bool { return x == w })
	if len(s.waiters) > 0 {
		// A plain wake-up the leaving waiter did not use goes to the next
		// one: a release woke one waiter, and one must go and look.
		select {
		case u := <-w.wake:
			if !u.Msg.Handoff {
				s.offer(u)
			}
		default:
		}
		return
	}
	delete(c.chans, w.channel)
	if c.ps != nil {
		c.changed()
	}
	if len(c.chans) == 0 && c.ps != nil {
		c.lingerGen++
		gen := c.lingerGen
		c.linger = time.AfterFunc(connLinger, func() { c.closeIfIdle(gen) })
	}
}

// closeIfIdle closes the connection if still no channel is wanted. The
// close itself runs outside c.mu: it waits for go-redis's own lock, which a
// write or a reconnect may hold for a while.
func (c *conn) closeIfIdle(gen uint64) {
	c.mu.Lock()
	if len(c.chans) > 0 || c.ps == nil || c.linger == nil || gen != c.lingerGen {
		c.mu.Unlock()
		return
	}
	ps := c.ps
	c.dropLocked()
	c.mu.Unlock()
	_ = ps.Close() // ends the dispatcher
}

// dropLocked forgets the connection: it ends the writer and clears what the
// server had confirmed. Called with c.mu held.
func (c *conn) dropLocked() {
	close(c.done)
	c.ps, c.linger = nil, nil
	clear(c.live)
	clear(c.dropping)
	// The channels still wanted are not subscribed on the next connection
	// yet: a waiter that joins them must wait for its confirmation.
	for _, s := range c.chans {
		select {
		case <-s.ready:
			s.ready = make(chan struct{})
		default:
		}
	}
}
