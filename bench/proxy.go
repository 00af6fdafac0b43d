package main

// A small TCP fault-injection proxy for the safety scenarios.
//
// The proxy sits between a client (a worker's pgx connection, a go-redis
// client) and a server and can inject two faults that the Kleppmann
// scenarios need:
//
//   - Delay: client→server bytes are held back for a while, like a slow
//     network link, so that a write the client has already sent reaches the
//     server late (e.g. after the client's lease has expired).
//   - SetTarget: every open connection is cut and new connections go to a
//     different server, like a virtual IP moving to a newly promoted primary.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// proxyBufSize is the size of the buffer client bytes are read into; one
	// Read of up to this many bytes is one chunk.
	proxyBufSize = 32 << 10
	// proxyQueueLen bounds the chunks queued per connection. When it is
	// full the proxy stops reading from that client (TCP back-pressure).
	proxyQueueLen = 256
	// proxyDialTimeout bounds how long connecting to the target may take.
	proxyDialTimeout = 5 * time.Second
)

// faultProxy forwards TCP connections from a loopback listener to a target address.
//
// Each client→server chunk (the bytes returned by one Read from the client)
// is stamped with a delivery time when it is read and delivered in order by
// a per-connection writer, so a delay never reorders bytes. Server→client
// bytes are copied straight through.
//
// All methods are safe for concurrent use.
type faultProxy struct {
	ln     net.Listener
	ctx    context.Context // cancelled by Close; aborts dials in progress
	cancel context.CancelFunc
	delay  atomic.Int64 // time.Duration added to chunks read from now on
	wg     sync.WaitGroup

	mu      sync.Mutex
	target  string
	gen     uint64 // bumped by SetTarget; dials under an older generation are dropped
	conns   map[*proxyConn]struct{}
	held    int           // chunks read from clients and not yet written to servers
	changed chan struct{} // closed and replaced whenever held changes
	closed  bool
}

// proxyConn is one proxied client/server connection pair.
type proxyConn struct {
	p      *faultProxy
	client net.Conn
	server net.Conn
	done   chan struct{} // closed when the pair is torn down
	once   sync.Once
	halves atomic.Int32 // directions that finished cleanly (EOF passed on)
}

// proxyChunk is one client→server read waiting to be delivered at due.
type proxyChunk struct {
	data []byte
	due  time.Time
}

// startProxy listens on 127.0.0.1:0 and forwards each accepted connection to target.
func startProxy(target string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &faultProxy{
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		target:  target,
		conns:   make(map[*proxyConn]struct{}),
		changed: make(chan struct{}),
	}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr is host:port clients dial.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes new connections go to addr and closes every connection currently open
// (both sides), as a virtual IP moving to a new primary would.
//
// Chunks still held for the closed connections are dropped. A connection
// accepted before the call whose dial to the old target is still in
// progress is dropped as well once the dial completes.
func (p *faultProxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.gen++
	open := p.snapshotLocked()
	p.mu.Unlock()
	for _, c := range open {
		c.close()
	}
}

// Delay makes every chunk of bytes read from clients (client→server direction) from now on
// be delivered to the server d after it was read, in order (a slow network link: later
// chunks are never delivered before earlier ones). Delay(0) restores immediate delivery for
// chunks read afterwards (chunks already held still wait their time). Server→client bytes
// are never delayed. A negative d is treated as 0.
func (p *faultProxy) Delay(d time.Duration) {
	p.delay.Store(int64(max(d, 0)))
}

// Held reports how many client→server chunks are currently held back, not yet delivered.
//
// The count covers all connections. A chunk counts from the moment it is
// read from the client until it is handed to the server connection (or
// dropped because its connection was closed), so once the server can have
// received a chunk it is no longer counted. Without a delay the count may
// be briefly non-zero while bytes are in transit.
func (p *faultProxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// WaitHeld blocks until at least n chunks are held or ctx ends.
// It returns ctx.Err() in the latter case.
func (p *faultProxy) WaitHeld(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		if p.held >= n {
			p.mu.Unlock()
			return nil
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops listening, closes all connections and waits for the proxy's goroutines.
// Calling Close more than once is harmless; later calls return nil.
func (p *faultProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	open := p.snapshotLocked()
	p.mu.Unlock()

	p.cancel()
	err := p.ln.Close()
	for _, c := range open {
		c.close()
	}
	p.wg.Wait()
	return err
}

// snapshotLocked returns the open connections. p.mu must be held.
func (p *faultProxy) snapshotLocked() []*proxyConn {
	open := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
	}
	return open
}

// addHeld adjusts the held-chunk count and wakes WaitHeld callers.
func (p *faultProxy) addHeld(n int) {
	p.mu.Lock()
	p.held += n
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// acceptLoop accepts clients until the listener is closed.
func (p *faultProxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient failure (e.g. out of file descriptors): back off briefly.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve connects client to the current target and pumps bytes both ways
// until the pair is closed.
func (p *faultProxy) serve(client net.Conn) {
	p.mu.Lock()
	target, gen := p.target, p.gen
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(p.ctx, proxyDialTimeout)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		client.Close()
		return
	}

	c := &proxyConn{p: p, client: client, server: server, done: make(chan struct{})}
	if !p.register(c, gen) {
		client.Close()
		server.Close()
		return
	}

	queue := make(chan proxyChunk, proxyQueueLen)
	p.wg.Go(c.serverToClient)
	p.wg.Go(func() { c.readClient(queue) })
	c.writeServer(queue)
}

// register records c as open unless the proxy was closed or retargeted
// since c's target was chosen.
func (p *faultProxy) register(c *proxyConn, gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.gen != gen {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// close tears down both sides of the pair; it is idempotent.
func (c *proxyConn) close() {
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
func (c *proxyConn) halfDone() {
	if c.halves.Add(1) == 2 {
		c.close()
	}
}

// serverToClient copies server bytes to the client without delay. On EOF
// from the server the client's write side is shut down; any error closes
// the pair.
func (c *proxyConn) serverToClient() {
	if _, err := io.Copy(c.client, c.server); err != nil {
		c.close()
		return
	}
	closeWrite(c.client)
	c.halfDone()
}

// readClient reads chunks from the client, stamps each with its delivery
// time and queues it for writeServer. It closes queue when the client
// stops sending or the pair is closed.
func (c *proxyConn) readClient(queue chan<- proxyChunk) {
	defer close(queue)
	buf := make([]byte, proxyBufSize)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			ch := proxyChunk{
				data: bytes.Clone(buf[:n]),
				due:  time.Now().Add(time.Duration(c.p.delay.Load())),
			}
			c.p.addHeld(1)
			select {
			case queue <- ch:
			case <-c.done:
				c.p.addHeld(-1)
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

// writeServer delivers queued chunks to the server in order, each no
// earlier than its due time. After the client's EOF has been reached and
// every chunk delivered, the server's write side is shut down. If the pair
// is closed, remaining chunks are dropped (but still drained so that Held
// stays accurate).
func (c *proxyConn) writeServer(queue <-chan proxyChunk) {
	failed := false
	for ch := range queue {
		due := !failed && c.waitUntil(ch.due)
		// Release the chunk before writing it, so that by the time the
		// server can see these bytes Held no longer counts them.
		c.p.addHeld(-1)
		if !due {
			if !failed {
				failed = true
				c.close()
			}
			continue
		}
		if _, err := c.server.Write(ch.data); err != nil {
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
	closeWrite(c.server)
	c.halfDone()
}

// waitUntil sleeps until t and reports false if the pair was closed first.
func (c *proxyConn) waitUntil(t time.Time) bool {
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

// closeWrite shuts down the write side of conn (passing EOF on), or closes
// it entirely if it does not support half-close.
func closeWrite(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	conn.Close()
}
