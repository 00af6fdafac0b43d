package faults_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// testServer is a loopback TCP server that greets every connection with
// its name and a newline, then echoes whatever it receives.
type testServer struct {
	name     string
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startTestServer(t *testing.T, name string) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{name: name, ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Go(s.serve)
	t.Cleanup(s.close)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			if _, err := io.WriteString(c, s.name+"\n"); err != nil {
				return
			}
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

func (s *testServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// proxyClient is a client connection through the proxy.
type proxyClient struct {
	conn *net.TCPConn
	r    *bufio.Reader
}

// dialProxy connects to p, checks the greeting names want, and returns the
// connection with a deadline so that a broken proxy fails the test rather
// than hanging it.
func dialProxy(t *testing.T, p *faults.Proxy, want string) *proxyClient {
	t.Helper()
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	c := &proxyClient{conn: conn.(*net.TCPConn), r: bufio.NewReader(conn)}
	if got := c.readN(t, len(want)+1); got != want+"\n" {
		t.Fatalf("greeting = %q, want %q", got, want+"\n")
	}
	return c
}

func (c *proxyClient) write(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		t.Fatal(err)
	}
}

func (c *proxyClient) readN(t *testing.T, n int) string {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(buf)
}

func startTestProxy(t *testing.T, target string) *faults.Proxy {
	t.Helper()
	return faults.NewProxy(t, target)
}

func TestProxyForwardsBothWays(t *testing.T) {
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())

	c := dialProxy(t, p, "A") // server→client
	for _, msg := range []string{"hello", "world", string(make([]byte, 100<<10))} {
		c.write(t, msg)
		if got := c.readN(t, len(msg)); got != msg {
			t.Fatalf("echo of %d bytes differs", len(msg))
		}
	}

	// Half-close passes through: the server sees EOF after the last bytes,
	// closes, and the client sees EOF in turn.
	c.write(t, "bye")
	if err := c.conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c.r)
	if err != nil || string(rest) != "bye" {
		t.Fatalf("after half-close read %q, %v; want \"bye\", nil", rest, err)
	}
	if n := p.Held(); n != 0 {
		t.Fatalf("Held() = %d after delivery, want 0", n)
	}
}

func TestProxyDelayHoldsWrite(t *testing.T) {
	const d = 150 * time.Millisecond
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())
	p.Delay(d)

	// Server→client bytes are not delayed.
	start := time.Now()
	c := dialProxy(t, p, "A")
	if el := time.Since(start); el >= d {
		t.Fatalf("greeting took %v; server→client must not be delayed", el)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	sent := time.Now()
	c.write(t, "UPDATE")
	if err := p.WaitHeld(ctx, 1); err != nil {
		t.Fatalf("WaitHeld: %v", err)
	}
	if n := p.Held(); n != 1 {
		t.Fatalf("Held() = %d while in flight, want 1", n)
	}
	if got := c.readN(t, len("UPDATE")); got != "UPDATE" {
		t.Fatalf("echo = %q", got)
	}
	// The echo cannot come back before the server received the write.
	if el := time.Since(sent); el < d {
		t.Fatalf("write reached server after %v, want >= %v", el, d)
	}
	if n := p.Held(); n != 0 {
		t.Fatalf("Held() = %d after delivery, want 0", n)
	}

	// Delay(0) restores immediate delivery.
	p.Delay(0)
	sent = time.Now()
	c.write(t, "fast")
	if got := c.readN(t, 4); got != "fast" {
		t.Fatalf("echo = %q", got)
	}
	if el := time.Since(sent); el >= d {
		t.Fatalf("undelayed write took %v", el)
	}
}

func TestProxyWaitHeldContext(t *testing.T) {
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := p.WaitHeld(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitHeld with nothing held = %v, want DeadlineExceeded", err)
	}
}

func TestProxyDelayPreservesOrder(t *testing.T) {
	const d = 100 * time.Millisecond
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())
	c := dialProxy(t, p, "A")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()

	// Several delayed chunks, each its own read (WaitHeld proves it), then
	// an undelayed one: it must still queue behind the earlier chunks.
	p.Delay(d)
	sent := time.Now()
	chunks := []string{"one,", "two,", "three,"}
	for i, s := range chunks {
		c.write(t, s)
		if err := p.WaitHeld(ctx, i+1); err != nil {
			t.Fatalf("WaitHeld(%d): %v", i+1, err)
		}
	}
	p.Delay(0)
	c.write(t, "four")
	chunks = append(chunks, "four")

	want := ""
	for _, s := range chunks {
		want += s
	}
	if got := c.readN(t, len(want)); got != want {
		t.Fatalf("server received %q, want %q", got, want)
	}
	if el := time.Since(sent); el < d {
		t.Fatalf("chunks arrived after %v, want >= %v", el, d)
	}
}

func TestProxySetTarget(t *testing.T) {
	a := startTestServer(t, "A")
	b := startTestServer(t, "B")
	p := startTestProxy(t, a.addr())

	old1 := dialProxy(t, p, "A")
	old2 := dialProxy(t, p, "A")

	// A held chunk on a connection that is cut is dropped, not delivered.
	p.Delay(time.Second)
	old1.write(t, "lost")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := p.WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}

	p.SetTarget(b.addr())
	p.Delay(0)

	for i, c := range []*proxyClient{old1, old2} {
		if _, err := c.r.ReadByte(); err == nil {
			t.Fatalf("old connection %d still open after SetTarget", i+1)
		}
	}
	// Dropping the held chunk is asynchronous; give the writer a moment.
	for deadline := time.Now().Add(time.Second); p.Held() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("Held() = %d after SetTarget, want 0", p.Held())
		}
		time.Sleep(5 * time.Millisecond)
	}

	c := dialProxy(t, p, "B")
	c.write(t, "ping")
	if got := c.readN(t, 4); got != "ping" {
		t.Fatalf("echo = %q", got)
	}
	if got := a.accepted.Load(); got != 2 {
		t.Fatalf("server A accepted %d connections, want 2", got)
	}
	if got := b.accepted.Load(); got != 1 {
		t.Fatalf("server B accepted %d connections, want 1", got)
	}
}

func TestProxyCloseNoLeak(t *testing.T) {
	srv := startTestServer(t, "A")
	before := runtime.NumGoroutine()

	p, err := faults.StartProxy(srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	c := dialProxy(t, p, "A")
	p.Delay(time.Second)
	c.write(t, "held at close")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := p.WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	dialProxy(t, p, "A") // an idle connection, also closed by Close

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.r.ReadByte(); err == nil {
		t.Fatal("client connection still open after Close")
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("proxy still accepting after Close")
	}

	// The test server's per-connection goroutines end asynchronously once
	// the proxy has closed its side.
	deadline := time.Now().Add(time.Second)
	for {
		after := runtime.NumGoroutine()
		if after <= before {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after Close\n%s",
				before, after, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProxyDelayReplies(t *testing.T) {
	const d = 100 * time.Millisecond
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())
	c := dialProxy(t, p, "A")
	p.DelayReplies(d)
	sent := time.Now()
	c.write(t, "ping")
	if got := c.readN(t, 4); got != "ping" {
		t.Fatalf("echo = %q", got)
	}
	if el := time.Since(sent); el < d {
		t.Fatalf("reply came back after %v, want >= %v", el, d)
	}
	if n := p.Held(); n != 0 {
		t.Fatalf("Held() = %d: replies must not count", n)
	}
}

func TestProxyCutRestore(t *testing.T) {
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())
	old := dialProxy(t, p, "A")
	p.Cut()
	if _, err := old.r.ReadByte(); err == nil {
		t.Fatal("connection still open after Cut")
	}
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("a new connection got through a cut link")
	}
	p.Restore()
	c := dialProxy(t, p, "A")
	c.write(t, "back")
	if got := c.readN(t, 4); got != "back" {
		t.Fatalf("echo = %q", got)
	}
}

// TestProxyFreezeOn: bytes before the pattern go through; the chunk with
// the pattern, and everything sent after it on any connection, do not.
func TestProxyFreezeOn(t *testing.T) {
	srv := startTestServer(t, "A")
	p := startTestProxy(t, srv.addr())
	c := dialProxy(t, p, "A")
	p.FreezeOn([]byte("claim"))
	c.write(t, "acquire\n")
	if got := c.readN(t, len("acquire\n")); got != "acquire\n" {
		t.Fatalf("echo = %q", got)
	}
	c.write(t, "claim\n")
	other := dialProxy(t, p, "A") // the server's greeting still comes back
	other.write(t, "release\n")
	for _, pc := range []*proxyClient{c, other} {
		pc.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := pc.r.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after the freeze: %d bytes, %v; want nothing", n, err)
		}
	}
}
