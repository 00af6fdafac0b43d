package faults

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one proxied client/server connection pair.
type conn struct {
	p      *Proxy
	client net.Conn
	server net.Conn
	done   chan struct{} // closed when the pair is torn down
	once   sync.Once
	halves atomic.Int32 // directions that finished cleanly (EOF passed on)
}

// chunk is one read waiting to be delivered at due.
type chunk struct {
	data []byte
	due  time.Time
}

// close tears down both sides of the pair; it is idempotent.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// halfDone records that one direction ended cleanly; once both have, the
// pair is closed.
func (c *conn) halfDone() {
	if c.halves.Add(1) == 2 {
		c.close()
	}
}

// hold counts a chunk of dir in or out of the proxy's held count (only
// client→server chunks count).
func (c *conn) hold(dir direction, n int) {
	if dir == toServer {
		c.p.addHeld(n)
	}
}

// pump copies src to dst in direction dir, each chunk no earlier than the
// delay of dir at the time it was read.
func (c *conn) pump(dst, src net.Conn, dir direction) {
	queue := make(chan chunk, queueLen)
	c.p.wg.Go(func() { c.read(src, dir, queue) })
	c.write(dst, dir, queue)
}

// read reads chunks from src, stamps each with its delivery time and
// queues it. It closes queue when src stops sending or the pair is closed.
func (c *conn) read(src net.Conn, dir direction, queue chan<- chunk) {
	defer close(queue)
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if pat := c.p.freeze.Load(); dir == toServer && pat != nil && bytes.Contains(buf[:n], *pat) {
				c.p.Delay(frozenDelay)
			}
			ch := chunk{data: bytes.Clone(buf[:n]), due: time.Now().Add(time.Duration(c.p.delay[dir].Load()))}
			c.hold(dir, 1)
			select {
			case queue <- ch:
			case <-c.done:
				c.hold(dir, -1)
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.close()
			}
			return
		}
	}
}

// write delivers queued chunks to dst in order, each no earlier than its
// due time. After src's EOF and every chunk delivered, dst's write side is
// shut down. If the pair is closed, the remaining chunks are dropped (and
// still drained, so that Held stays right).
func (c *conn) write(dst net.Conn, dir direction, queue <-chan chunk) {
	failed := false
	for ch := range queue {
		due := !failed && c.waitUntil(ch.due)
		// Uncount the chunk before writing it, so that by the time the
		// server can see these bytes Held no longer counts them.
		c.hold(dir, -1)
		if !due {
			if !failed {
				failed = true
				c.close()
			}
			continue
		}
		if _, err := dst.Write(ch.data); err != nil {
			failed = true
			c.close()
		}
	}
	if failed {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	closeWrite(dst)
	c.halfDone()
}

// waitUntil sleeps until t and reports false if the pair was closed first.
func (c *conn) waitUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-c.done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.done:
		return false
	}
}

// closeWrite shuts down the write side of nc (passing EOF on), or closes it
// entirely if it cannot half-close.
func closeWrite(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	nc.Close()
}
