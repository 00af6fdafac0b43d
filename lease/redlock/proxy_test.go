package redlock_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// delayProxy forwards TCP connections to a backend and holds every chunk of
// bytes, in both directions, for a fixed delay before passing it on: a
// network with a round-trip time of 2×delay, on loopback. Sleeping costs no
// CPU, so on a small machine it shows whether a fan-out to several servers
// runs in parallel (latency ≈ one round trip) or in series (≈ N round
// trips), which loopback alone cannot: there, the servers compete for the
// same few cores.
type delayProxy struct {
	ln      net.Listener
	backend string
	delay   time.Duration
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

// newDelayProxy starts a proxy to backend on a free loopback port; it stops
// at cleanup.
func newDelayProxy(tb testing.TB, backend string, delay time.Duration) *delayProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &delayProxy{ln: ln, backend: backend, delay: delay}
	p.wg.Go(p.serve)
	tb.Cleanup(p.close)
	return p
}

func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

func (p *delayProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(b, c) })
		p.wg.Go(func() { p.pipe(c, b) })
	}
}

// pipe copies src to dst, each chunk delay late, in order.
func (p *delayProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	p.wg.Go(func() {
		defer dst.Close()
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.data); err != nil {
				return
			}
		}
	})
	defer close(q)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{time.Now().Add(p.delay), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
