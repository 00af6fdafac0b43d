package faults

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// bufSize is the size of the buffer bytes are read into; one Read of up
	// to this many bytes is one chunk.
	bufSize = 32 << 10
	// queueLen bounds the chunks queued per direction of a connection. When
	// it is full the proxy stops reading from that side (TCP back-pressure).
	queueLen = 256
	// dialTimeout bounds how long connecting to the target may take.
	dialTimeout = 5 * time.Second
)

// Proxy forwards TCP connections from a loopback listener to a target
// address, and can make the link misbehave:
//
//   - [Proxy.Delay] holds client→server bytes back, like a slow link, so a
//     write the client already sent reaches the server late;
//     [Proxy.DelayReplies] does the same to server→client bytes;
//   - [Proxy.SetTarget] cuts every open connection and sends new ones to
//     another server, like a virtual IP moving to a promoted replica;
//   - [Proxy.Cut] drops every connection and refuses new ones (a network
//     partition) until [Proxy.Restore].
//
// Each chunk (the bytes of one Read) is stamped with its delivery time when
// it is read and delivered in order by a writer per direction, so a delay
// never reorders bytes. All methods are safe for concurrent use.
type Proxy struct {
	ln      net.Listener
	ctx     context.Context // cancelled by Close; aborts dials in progress
	cancel  context.CancelFunc
	delay   [2]atomic.Int64        // time.Duration per direction, for chunks read from now on
	freeze  atomic.Pointer[[]byte] // FreezeOn's pattern, nil when none
	wg      sync.WaitGroup
	mu      sync.Mutex
	target  string
	cut     bool
	gen     uint64 // bumped by SetTarget and Cut; dials under an older generation are dropped
	conns   map[*conn]struct{}
	held    int           // client→server chunks read and not yet written
	changed chan struct{} // closed and replaced whenever held changes
	closed  bool
}

// direction is one way through a connection.
type direction int

const (
	toServer direction = iota
	toClient
)

// StartProxy listens on 127.0.0.1:0 and forwards each accepted connection
// to target. The caller must Close it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, target: target,
		conns: make(map[*conn]struct{}), changed: make(chan struct{})}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// NewProxy is [StartProxy] for tests: it fails tb on error and closes the
// proxy at cleanup.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := StartProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// Addr is the host:port clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address new connections go to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetTarget makes new connections go to addr and closes every open
// connection (both sides), as a virtual IP moving to a new primary would.
// Chunks still held for the closed connections are dropped, and so is a
// connection whose dial to the old target is still in progress.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.gen++
	open := p.openLocked()
	p.mu.Unlock()
	closeAll(open)
}

// Cut drops every open connection and refuses new ones (each is closed as
// soon as it is accepted) until Restore: the link is partitioned. Unlike a
// paused server, nothing sent before the cut is delivered afterwards.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.gen++
	open := p.openLocked()
	p.mu.Unlock()
	closeAll(open)
}

// Restore ends a Cut: new connections reach the target again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Delay makes every client→server chunk read from now on reach the server d
// after it was read, in order. Delay(0) restores immediate delivery for
// chunks read afterwards (chunks already held still wait their time). A
// negative d counts as 0.
func (p *Proxy) Delay(d time.Duration) { p.delay[toServer].Store(int64(max(d, 0))) }

// FreezeOn makes the link freeze at the first client→server chunk that
// contains pattern: from that chunk on, no client→server byte reaches the
// server until the proxy is closed, on any connection, as if the server
// froze just before that command. It injects a pause at an exact step (a
// given script, a given key) that a SIGSTOP from outside could not time.
func (p *Proxy) FreezeOn(pattern []byte) { p.freeze.Store(&pattern) }

// frozenDelay is the delay of every client→server chunk once FreezeOn's
// pattern went by: longer than any test.
const frozenDelay = 24 * time.Hour

// DelayReplies is Delay for server→client chunks. With both set to d, the
// link has a round-trip time of 2×d: on loopback that shows whether calls
// to several servers run in parallel, which shared cores alone cannot.
func (p *Proxy) DelayReplies(d time.Duration) { p.delay[toClient].Store(int64(max(d, 0))) }

// Held reports how many client→server chunks are held back. A chunk counts
// from the moment it is read from the client until it is handed to the
// server connection (or dropped with its connection), so once the server
// can have received it, it no longer counts. Without a delay the count may
// be briefly non-zero while bytes are in transit.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// WaitHeld blocks until at least n client→server chunks are held, or ctx
// ends (it then returns ctx.Err()).
func (p *Proxy) WaitHeld(ctx context.Context, n int) error {
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

// Close stops listening, closes every connection and waits for the proxy's
// goroutines. Later calls do nothing and return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	open := p.openLocked()
	p.mu.Unlock()

	p.cancel()
	err := p.ln.Close()
	closeAll(open)
	p.wg.Wait()
	return err
}

// openLocked returns the open connections; p.mu must be held.
func (p *Proxy) openLocked() []*conn {
	open := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
	}
	return open
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.close()
	}
}

// addHeld adjusts the held-chunk count and wakes WaitHeld callers.
func (p *Proxy) addHeld(n int) {
	p.mu.Lock()
	p.held += n
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// acceptLoop accepts clients until the listener is closed.
func (p *Proxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of file descriptors): back off.
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
func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	target, gen, cut := p.target, p.gen, p.cut
	p.mu.Unlock()
	if cut {
		client.Close()
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		client.Close()
		return
	}
	c := &conn{p: p, client: client, server: server, done: make(chan struct{})}
	if !p.register(c, gen) {
		client.Close()
		server.Close()
		return
	}
	p.wg.Go(func() { c.pump(client, server, toClient) })
	c.pump(server, client, toServer)
}

// register records c as open unless the proxy was closed, cut or retargeted
// since c's target was chosen.
func (p *Proxy) register(c *conn, gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.gen != gen {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}
