package fencebridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

var (
	// ErrInvalid is returned (wrapped), before any I/O, for a nil argument,
	// a lock name that fencelock refuses, or a ttl below 1ms.
	ErrInvalid = errors.New("fencebridge: invalid argument")
	// ErrNotAcquired is returned (wrapped, with the cause) when the old
	// lock or fencelock's could not be taken, or the old one ran out
	// before fencelock's was taken.
	ErrNotAcquired = errors.New("fencebridge: not acquired")
)

// Old is the old library's lock, taken on the bare name as the old fleet
// takes it. [Redsync] and [Redislock] make one.
type Old interface {
	// Lock takes the lock on name, as the old library does (its retries,
	// its expiry), and returns it held.
	Lock(ctx context.Context, name string) (OldLock, error)
}

// OldLock is one held lock of the old library.
type OldLock interface {
	// Until is the end of the lock's validity by the local clock.
	Until() time.Time
	// Unlock releases the lock if this holder still has it.
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

// Acquire takes the old library's lock on name, then fencelock's lease on
// name for ttl, waiting for it at most until the old lock runs out. The
// lock is held until [Lock.Deadline], the earlier of the two deadlines.
// On failure nothing stays held (see the package doc for an ended ctx),
// and the error wraps ErrNotAcquired and its cause.
func (b *Bridge) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalid)
	}
	// Checked before the old lock is taken: fencelock would refuse them
	// after it.
	if err := fence.ValidateKey(name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: ttl %v, want at least 1ms", ErrInvalid, ttl)
	}
	old, err := b.old.Lock(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: the old lock: %w", ErrNotAcquired, name, oneLine{err})
	}
	wait, cancel := context.WithDeadline(ctx, old.Until())
	l, err := b.locks.Acquire(wait, name, ttl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: fencelock's lock: %w%s", ErrNotAcquired, name, oneLine{err}, unlock(ctx, old))
	}
	lk := &Lock{lease: l, old: old}
	if !time.Now().Before(lk.Deadline()) {
		// The old lock ran out while fencelock's was being taken: an old
		// process may hold it by now.
		rerr := l.Release(ctx)
		return nil, fmt.Errorf("%w: %q: the old lock ran out before fencelock's was taken%s%s",
			ErrNotAcquired, name, also("fencelock's release", rerr), unlock(ctx, old))
	}
	lk.ctx, lk.cancel = context.WithDeadline(l.Context(), old.Until())
	return lk, nil
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

// Lock is a lock held through a Bridge: the old library's and fencelock's.
type Lock struct {
	lease  *lease.Lease
	old    OldLock
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once // Release runs once; a second call returns nil
}

// Token is fencelock's fencing token, to send with every write.
func (l *Lock) Token() fence.Token { return l.lease.Token() }

// Deadline is the earlier of the two locks' local deadlines: past it, the
// lock must be taken as lost.
func (l *Lock) Deadline() time.Time {
	if d := l.lease.Deadline(); d.Before(l.old.Until()) {
		return d
	}
	return l.old.Until()
}

// Context is cancelled at the old lock's deadline, when fencelock's lease
// ends (its deadline, a loss, a release) or on Release. Run the protected
// work under it.
func (l *Lock) Context() context.Context { return l.ctx }

// Release releases fencelock's lease, then the old lock, and reports both
// failures in one line (the error wraps each, e.g. lease.ErrLost).
// Releasing again returns nil without I/O; releasing a nil Lock returns an
// error wrapping ErrInvalid.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("%w: nil lock", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	var err error
	l.once.Do(func() { err = l.release(ctx) })
	return err
}

func (l *Lock) release(ctx context.Context) error {
	l.cancel()
	lerr := l.lease.Release(ctx)
	oerr := l.old.Unlock(ctx)
	switch {
	case lerr != nil && oerr != nil:
		return fmt.Errorf("fencebridge: release: %w; the old lock: %w", oneLine{lerr}, oerr)
	case lerr != nil:
		return fmt.Errorf("fencebridge: release: %w", oneLine{lerr})
	case oerr != nil:
		return fmt.Errorf("fencebridge: release: the old lock: %w", oerr)
	}
	return nil
}
