package notify

// The read side of a conn: from the socket to the one waiter a message
// names.

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
)

// dispatch reads a classic connection until it is closed and hands each
// message to one waiter, on this goroutine: go-redis's Channel would put
// its reader goroutine, a Go channel and a health-check goroutine's wake-up
// between the socket and the waiter. Like that health check, a timer pings
// the connection while it is silent, every pingEvery; go-redis reconnects
// one whose read or ping fails, and subscribes its channels again.
func (c *conn) dispatch(ps *redis.PubSub) {
	h := &health{ps: ps}
	h.t = time.AfterFunc(pingEvery, h.ping)
	defer h.t.Stop()
	failed := false
	for {
		m, err := ps.Receive(context.Background())
		h.t.Reset(pingEvery)
		switch {
		case errors.Is(err, redis.ErrClosed):
			return
		case err != nil:
			if failed { // again: let the reconnect breathe
				time.Sleep(restartPause)
			}
			failed = true
		default:
			failed = false
			c.handle(ps, m)
		}
	}
}

// health pings a silent classic connection, as go-redis's Channel does.
type health struct {
	ps *redis.PubSub
	t  *time.Timer
}

// ping runs on h's timer: its Pong, read by dispatch, re-arms the timer,
// and so does a ping that found no reply yet, until the connection is
// closed.
func (h *health) ping() {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	err := h.ps.Ping(ctx)
	cancel()
	if !errors.Is(err, redis.ErrClosed) {
		h.t.Reset(pingEvery)
	}
}

// pingEvery is how long a classic pub/sub connection may be silent before
// it is pinged (go-redis's Channel: 3s).
const pingEvery = 3 * time.Second

// receive reads a sharded connection until it is closed, and replaces it on
// the first error (see conn).
func (c *conn) receive(ps *redis.PubSub) {
	for {
		m, err := ps.Receive(context.Background())
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(restartPause)
			c.restart(ps)
			return
		}
		c.handle(ps, m)
	}
}

// restart replaces ps, if it is still the connection, with a new one that
// subscribes every wanted channel again.
func (c *conn) restart(ps *redis.PubSub) {
	c.mu.Lock()
	if c.ps != ps {
		c.mu.Unlock()
		return
	}
	c.dropLocked()
	if len(c.chans) > 0 {
		c.changed()
	}
	c.mu.Unlock()
	_ = ps.Close()
}

// handle takes one message read from ps.
func (c *conn) handle(ps *redis.PubSub, m any) {
	switch m := m.(type) {
	case *redis.Subscription:
		c.subscription(ps, m)
	case *redis.Message:
		if msg, err := protocol.ParseMessage(m.Payload); err == nil {
			c.deliver(m.Channel, Wakeup{Msg: msg, At: time.Now()})
		}
	}
}

// subscription records the server's confirmation of a SUBSCRIBE or an
// UNSUBSCRIBE (or their sharded forms) on ps.
func (c *conn) subscription(ps *redis.PubSub, m *redis.Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ps != ps {
		return // a closed connection's last words
	}
	switch m.Kind {
	case "unsubscribe", "sunsubscribe":
		if !c.dropping[m.Channel] {
			delete(c.live, m.Channel) // the server dropped it (a slot moved)
		}
		delete(c.dropping, m.Channel)
	case "subscribe", "ssubscribe":
		if c.dropping[m.Channel] {
			return // an older SUBSCRIBE's reply: an UNSUBSCRIBE follows it
		}
		c.live[m.Channel] = true
		if s := c.chans[m.Channel]; s != nil {
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
func (c *conn) deliver(channel string, u Wakeup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.chans[channel]
	if s == nil {
		return
	}
	if u.Msg.Handoff {
		for _, w := range s.waiters {
			if w.holder == u.Msg.Holder {
				replace(w.wake, u)
				return
			}
		}
		return // handed to a waiter of another client
	}
	s.offer(u)
}

// offer gives a plain wake-up to the first waiter with none pending.
// Called with the connection's mu held.
func (s *subscribers) offer(u Wakeup) {
	for _, w := range s.waiters {
		select {
		case w.wake <- u:
			return
		default:
		}
	}
}
