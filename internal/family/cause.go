package family

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// Dials records the last failed dial of one Redis client, so that a call
// which ended by its context with no reply can name why. go-redis dials on
// a goroutine of its own and retries a refused dial with a backoff; the
// caller waiting for the connection gets only ctx.Err() when its context
// ends, and the refusal reaches go-redis's log alone. A *Dials is a
// redis.Hook that sees every dial. A nil *Dials records nothing.
type Dials struct {
	last atomic.Pointer[DialError] // nil after a dial that succeeded
}

// DialError is a dial of a Redis client that failed.
type DialError struct {
	Addr string
	At   time.Time
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

// DialHook records the outcome of each dial.
func (d *Dials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			d.last.Store(&DialError{Addr: addr, At: time.Now(), Err: err})
		} else {
			d.last.Store(nil)
		}
		return conn, err
	}
}

// ProcessHook leaves commands alone (nil: the chain is not wrapped).
func (d *Dials) ProcessHook(redis.ProcessHook) redis.ProcessHook { return nil }

// ProcessPipelineHook leaves pipelines alone.
func (d *Dials) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook { return nil }

// Since returns the last failed dial if it happened at or after start and
// no dial has succeeded since; else nil.
func (d *Dials) Since(start time.Time) *DialError {
	if d == nil {
		return nil
	}
	if e := d.last.Load(); e != nil && !e.At.Before(start) {
		return e
	}
	return nil
}

// Explain adds to err, when it says that the caller's context ended, the
// last dial that failed since start (a refused connection says more than
// the deadline that followed it): "ERR (last dial to ADDR: connect:
// connection refused)". errors.Is finds both err's chain and the dial's.
// Any other err is returned as it is.
func (d *Dials) Explain(err error, start time.Time) error {
	if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return err
	}
	return d.Name(err, start)
}

// Name adds to err, an error of a call that got no reply, the last dial
// that failed since start, as Explain does, unless err already carries a
// dial error.
func (d *Dials) Name(err error, start time.Time) error {
	var known *DialError
	var op *net.OpError
	if err == nil || errors.As(err, &known) || errors.As(err, &op) {
		return err
	}
	if de := d.Since(start); de != nil {
		return &causeError{err: err, dial: de}
	}
	return err
}

// causeError is an error that ended by its context, with the dial failure
// that explains it.
type causeError struct {
	err  error
	dial *DialError
}

func (e *causeError) Error() string   { return e.err.Error() + " (" + e.dial.Error() + ")" }
func (e *causeError) Unwrap() []error { return []error{e.err, e.dial} }

// dials holds the one *Dials of each client, keyed weakly so that a client
// dropped by its owner is collected, and its entry with it.
var dials sync.Map // weak.Pointer[T] -> *Dials

// DialsOf returns the recorder of rdb's dials, adding it to rdb as a hook
// the first time (once per client, however many fencelock clients share
// it). It does no I/O. A *redis.Client (also a Sentinel failover client)
// is recorded; a *redis.ClusterClient or *redis.Ring records the node
// clients it creates from then on (the nodes it already has dial
// unrecorded); for any other client it returns nil, which records nothing.
func DialsOf(rdb redis.UniversalClient) *Dials {
	switch c := rdb.(type) {
	case *redis.Client:
		return dialsOf(c, func(d *Dials) { c.AddHook(d) })
	case *redis.ClusterClient:
		return dialsOf(c, func(d *Dials) { c.OnNewNode(func(n *redis.Client) { n.AddHook(d) }) })
	case *redis.Ring:
		return dialsOf(c, func(d *Dials) { c.OnNewNode(func(n *redis.Client) { n.AddHook(d) }) })
	}
	return nil
}

func dialsOf[T any](c *T, attach func(*Dials)) *Dials {
	key := weak.Make(c)
	if d, ok := dials.Load(key); ok {
		return d.(*Dials)
	}
	d, loaded := dials.LoadOrStore(key, new(Dials))
	if !loaded {
		attach(d.(*Dials))
		runtime.AddCleanup(c, func(k weak.Pointer[T]) { dials.Delete(k) }, key)
	}
	return d.(*Dials)
}
