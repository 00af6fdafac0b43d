package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// DialError is a direct dial to a client's server that failed.
type DialError struct {
	Addr string
	Err  error
}

// Error returns "last dial to ADDR: ERR", without the "dial tcp ADDR" that
// a *net.OpError repeats.
func (e *DialError) Error() string {
	err := e.Err
	if op, ok := err.(*net.OpError); ok && op.Err != nil {
		err = op.Err
	}
	return "last dial to " + e.Addr + ": " + err.Error()
}

// Unwrap returns Err: errors.Is(err, syscall.ECONNREFUSED) holds.
func (e *DialError) Unwrap() error { return e.Err }

// Prober dials a client's server directly, bypassing the client (which it
// leaves alone), to tell a server that refuses connections from one that
// is slow: go-redis retries a refused dial in the background, and its
// caller sees only its own context end. Only a *redis.Client without TLS
// can be probed (through its Network and Addr); for any other client a
// Prober reports nothing. One dial runs at a time, and its result serves
// every call for probeFresh.
type Prober struct {
	network, addr string

	mu      sync.Mutex
	at      time.Time
	last    *DialError
	running chan struct{} // closed when the running dial ends

	watches sync.Pool // *watch, reused by Watch: no timer allocated a call
}

// NewProber returns the prober of rdb.
func NewProber(rdb redis.UniversalClient) *Prober {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return &Prober{}
	}
	o := c.Options()
	if o.TLSConfig != nil || o.Addr == "" {
		return &Prober{}
	}
	return &Prober{network: o.Network, addr: o.Addr}
}

// Probe returns the error of a direct dial to the server, or nil when it
// connected (or the client cannot be probed, or ctx ended first).
func (p *Prober) Probe(ctx context.Context) *DialError {
	if p == nil || p.addr == "" {
		return nil
	}
	p.mu.Lock()
	if time.Since(p.at) < probeFresh {
		last := p.last
		p.mu.Unlock()
		return last
	}
	running := p.running
	if running == nil {
		p.running = make(chan struct{})
		p.mu.Unlock()
		last := p.dial(ctx)
		p.mu.Lock()
		p.at, p.last = time.Now(), last
		close(p.running)
		p.running = nil
		p.mu.Unlock()
		return last
	}
	p.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *Prober) dial(ctx context.Context) *DialError {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, p.network, p.addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
			return &DialError{Addr: p.addr, Err: err}
		}
		return nil // a dial that timed out or was cancelled says nothing a slow server would not
	}
	conn.Close()
	return nil
}

// Unreachable reports whether the server refuses connections right now. A
// cleanup whose call got no reply asks it: a server that is not running
// holds nothing the cleanup could undo now, and a lock it kept, when it
// comes back, expires with its ttl. The dial has a context of its own,
// bounded by probeTimeout: the caller's has usually just ended with its
// call, and a dial cancelled at once says nothing.
func (p *Prober) Unreachable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	return p.Probe(ctx) != nil
}

// Watch runs call, which says what it sent, and if it is still running after after (ProbeAfter
// when 0), probes the
// server meanwhile. When call fails without a reply and the probe found
// the server refusing connections, the error names the refused dial:
// "ERR (last dial to ADDR: connect: connection refused)". The probe is
// bounded by ctx, so it does not outlive the call by more than a dial's
// start.
func Watch[T any](ctx context.Context, p *Prober, after time.Duration, call func(context.Context) (T, Sent, error)) (T, Sent, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, NotSent, errors.Join(err, errSkipped)
	}
	if p == nil || p.addr == "" {
		return call(ctx)
	}
	if after <= 0 {
		after = ProbeAfter
	}
	w, _ := p.watches.Get().(*watch)
	if w == nil {
		w = &watch{p: p, ctx: ctx}
		w.t = time.AfterFunc(after, w.probe)
	} else {
		w.ctx = ctx
		w.found.Store(nil)
		w.t.Reset(after)
	}
	v, sent, err := call(ctx)
	stopped := w.t.Stop()
	de := w.found.Load()
	if stopped { // the probe never started: w is free again
		w.ctx = nil
		p.watches.Put(w)
	}
	if de != nil && err != nil && sent == MayHaveRun {
		// Refused meanwhile: this call never got a connection.
		return v, NotSent, Named(err, de)
	}
	return v, sent, err
}

// watch is Watch's timer, kept by its Prober for the next Watch once it
// was stopped before it fired.
type watch struct {
	p     *Prober
	ctx   context.Context // the call's; set before the timer is armed
	t     *time.Timer
	found atomic.Pointer[DialError]
}

// probe runs on w's timer. The probe outlives a call that ends meanwhile
// by at most one dial (probeTimeout), so that its result serves the next
// calls.
func (w *watch) probe() {
	if de := w.p.Probe(context.WithoutCancel(w.ctx)); de != nil {
		w.found.Store(de)
	}
}

// Named returns err, an error of a call that got no reply, with the
// refused dial that explains it: "ERR (last dial to ADDR: ...)".
// errors.Is finds both.
func Named(err error, de *DialError) error {
	var known *DialError
	if de == nil || errors.As(err, &known) {
		return err
	}
	return &causeError{err: err, dial: de}
}

// Since returns the failed dial of a probe made at or after start, if the
// last probe was one; else nil.
func (p *Prober) Since(start time.Time) *DialError {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at.Before(start) {
		return nil
	}
	return p.last
}

// causeError is an error that ended by its context, with the dial failure
// that explains it.
type causeError struct {
	err  error
	dial *DialError
}

func (e *causeError) Error() string   { return e.err.Error() + " (" + e.dial.Error() + ")" }
func (e *causeError) Unwrap() []error { return []error{e.err, e.dial} }

const (
	// ProbeAfter is how long a call runs, by default, before its server is
	// probed.
	ProbeAfter = 50 * time.Millisecond
	// probeFresh is how long a probe's result serves.
	probeFresh = 100 * time.Millisecond
	// probeTimeout bounds a probe's dial.
	probeTimeout = 200 * time.Millisecond
)
