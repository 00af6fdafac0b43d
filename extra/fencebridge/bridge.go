package fencebridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// Old is the old library's lock, taken on the bare name as the old fleet
// takes it. Packages redsyncbridge and redislockbridge (modules of their
// own) make one.
type Old interface {
	// Lock takes the lock on name, as the old library does (its retries,
	// its expiry), and returns it held.
	Lock(ctx context.Context, name string) (OldLock, error)
}

// OldLock is one held lock of the old library.
type OldLock interface {
	// Until is the end of the lock's validity by the local clock. It is
	// called while a Refresh runs, and must be safe for that.
	Until() time.Time
	// Refresh extends the lock by the old library's expiry, and moves
	// Until. It returns an error wrapping ErrOldNotHeld when the lock
	// expired or passed to another holder.
	Refresh(ctx context.Context) error
	// Unlock releases the lock if this holder still has it, and returns
	// an error wrapping ErrOldNotHeld if not.
	Unlock(ctx context.Context) error
}

// Bridge takes the old library's lock and then fencelock's, so that the
// old fleet and fencelock-only processes both exclude it. It is safe for
// concurrent use.
type Bridge struct {
	old   Old
	locks *lease.Client
}

// New returns a Bridge that takes old's lock, then locks's. Both must
// reach the Redis servers that the old fleet and the new one use.
func New(old Old, locks *lease.Client) (*Bridge, error) {
	if old == nil || locks == nil {
		return nil, fmt.Errorf("%w: nil old lock or lease client", ErrInvalid)
	}
	return &Bridge{old: old, locks: locks}, nil
}

// AcquireOption configures one Acquire.
type AcquireOption func(*acquireConfig) error

type acquireConfig struct {
	keepAlive bool
	interval  time.Duration
}

// WithKeepAlive refreshes both locks every interval (Lock.Refresh with the
// acquire's ttl) until the lock is released or lost; 0 means a third of
// the shorter of the two locks' validity at the acquire. The interval must
// be at least 10ms and shorter than that validity. A refresh that finds a
// lock gone ends the Lock; one that fails is retried at the next tick.
// Off by default.
func WithKeepAlive(interval time.Duration) AcquireOption {
	return func(c *acquireConfig) error {
		if interval != 0 && interval < minKeepAlive {
			return fmt.Errorf("%w: keep-alive interval %v, want 0 or at least %v", ErrInvalid, interval, minKeepAlive)
		}
		c.keepAlive, c.interval = true, interval
		return nil
	}
}

// minKeepAlive is the shortest keep-alive interval, as lease's.
const minKeepAlive = 10 * time.Millisecond

// Acquire takes the old library's lock on name, then fencelock's lease on
// name for ttl, waiting for it at most until the old lock runs out. The
// lock is held until [Lock.Deadline], the earlier of the two deadlines.
// On failure nothing stays held (see the package doc for an ended ctx),
// and the error wraps ErrNotAcquired and its cause.
func (b *Bridge) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil bridge", ErrInvalid)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalid)
	}
	var cfg acquireConfig
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalid)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	// Checked before the old lock is taken: fencelock would refuse them
	// after it.
	if err := fence.ValidateKey(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: ttl %v, want at least 1ms", ErrInvalid, ttl)
	}
	if cfg.interval >= ttl {
		return nil, fmt.Errorf("%w: keep-alive interval %v, want below the ttl %v", ErrInvalid, cfg.interval, ttl)
	}
	old, err := b.old.Lock(ctx, name)
	if err != nil {
		if cerr := ended(ctx); cerr != nil && !errors.Is(err, cerr) {
			// The old library's error for a call its context ended may be
			// a socket timeout; the caller checks for the context's.
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("%w: %q: the old lock: %w", ErrNotAcquired, name, oneLine{err})
	}
	wait, cancel := context.WithDeadline(ctx, old.Until())
	l, err := b.locks.Acquire(wait, name, ttl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: fencelock's lock: %w%s", ErrNotAcquired, name, oneLine{err}, unlock(ctx, old))
	}
	validity := time.Until(l.Deadline())
	if v := time.Until(old.Until()); v < validity {
		validity = v
	}
	if validity <= 0 {
		// The old lock ran out while fencelock's was being taken: an old
		// process may hold it by now.
		rerr := l.Release(ctx)
		return nil, fmt.Errorf("%w: %q: the old lock ran out before fencelock's was taken%s%s",
			ErrNotAcquired, name, also("fencelock's release", rerr), unlock(ctx, old))
	}
	lk := newLock(l, old)
	if cfg.keepAlive {
		interval := cfg.interval
		if interval == 0 {
			interval = max(validity/3, minKeepAlive)
		}
		if interval >= validity {
			_ = lk.Release(ctx)
			return nil, fmt.Errorf("%w: keep-alive interval %v, want below the locks' validity %v", ErrInvalid, interval, validity)
		}
		go lk.keepAlive(interval, ttl)
	}
	return lk, nil
}

// ended returns ctx's error, or context.DeadlineExceeded once its deadline
// has passed though its timer has not fired yet (a socket deadline set to
// ctx's can pass first).
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// unlock releases old after a failed acquire, unless ctx has ended (the old
// lock then expires), and returns what to add to the error.
func unlock(ctx context.Context, old OldLock) string {
	if ctx.Err() != nil {
		return "; the old lock is left to expire"
	}
	return also("the old lock's release", old.Unlock(ctx))
}

// also formats a secondary error for the end of a one-line message.
func also(what string, err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (%s failed too: %v)", what, oneLine{err})
}

// oneLine is err with its message on one line: redsync and fencelock's
// redlock join their nodes' errors with errors.Join, one per line, which
// breaks a log line. The parts stay reachable with errors.Is and
// errors.As.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", "; ") }
func (e oneLine) Unwrap() error { return e.err }
