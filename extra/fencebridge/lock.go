package fencebridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// Lock is a lock held through a Bridge: the old library's and fencelock's.
// It has the methods of a *lease.Lease that a holder uses (Token, Context,
// Done, Err, Held, Deadline, Refresh, Release, Reissue, Name), so that code
// written against an interface of them takes either.
//
// The Lock ends, for good, at the earlier of the two locks' deadlines,
// when a refresh finds either lock gone, or on Release; Err then says why.
// Refresh and Release are serialised. Methods are safe for concurrent use;
// on a nil *Lock they do no I/O, and behave as on a nil *lease.Lease.
type Lock struct {
	lease *lease.Lease
	old   OldLock

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex  // serialises Refresh and Release; guards the fields below
	oldTimer *time.Timer // ends the Lock at the old lock's deadline
	released bool
}

func newLock(l *lease.Lease, old OldLock) *Lock {
	ctx, cancel := context.WithCancelCause(l.Context()) // the lease's end is ours, with its cause
	lk := &Lock{lease: l, old: old, ctx: ctx, cancel: cancel}
	lk.oldTimer = time.AfterFunc(time.Until(old.Until()), lk.oldRanOut)
	return lk
}

func (l *Lock) oldRanOut() {
	l.end(fmt.Errorf("%w: %q: the old lock's validity ran out", ErrLost, l.lease.Name()))
}

// end ends the Lock with cause, unless it has ended already.
func (l *Lock) end(cause error) {
	l.cancel(cause)
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.leaseOf().Name() }

// Token is fencelock's fencing token, to send with every write.
func (l *Lock) Token() fence.Token { return l.leaseOf().Token() }

// Deadline is the earlier of the two locks' local deadlines: past it, the
// lock must be taken as lost.
func (l *Lock) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	if d := l.lease.Deadline(); d.Before(l.old.Until()) {
		return d
	}
	return l.old.Until()
}

// Context is cancelled when the Lock ends (see Lock); context.Cause is
// Err. Run the protected work under it.
func (l *Lock) Context() context.Context {
	if l == nil {
		return l.leaseOf().Context()
	}
	return l.ctx
}

// Done closes when the Lock ends.
func (l *Lock) Done() <-chan struct{} { return l.Context().Done() }

// Err is nil while the Lock lasts; afterwards an error wrapping
// lease.ErrLost (ErrLost when the old lock ended it) or lease.ErrReleased.
func (l *Lock) Err() error {
	ctx := l.Context()
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// leaseOf is l's lease, nil for a nil Lock: a nil *lease.Lease's methods
// do no I/O and say it is invalid.
func (l *Lock) leaseOf() *lease.Lease {
	if l == nil {
		return nil
	}
	return l.lease
}

// Held reports whether the Lock lasts by the local clock.
func (l *Lock) Held() bool { return l.Err() == nil && time.Now().Before(l.Deadline()) }

// Refresh extends fencelock's lease to ttl and the old lock by its own
// expiry. When either is found gone the Lock ends and the error wraps
// lease.ErrLost; after another failure (Redis did not answer) the Lock
// keeps its deadlines, and Refresh may be retried.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return fmt.Errorf("%w: nil lock", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return fmt.Errorf("fencebridge: refresh %q: %w", l.Name(), err)
	}
	if err := l.lease.Refresh(ctx, ttl); err != nil {
		if errors.Is(err, lease.ErrLost) {
			l.end(l.lease.Err())
		}
		return fmt.Errorf("fencebridge: refresh %q: %w", l.Name(), oneLine{err})
	}
	if err := l.old.Refresh(ctx); err != nil {
		if errors.Is(err, ErrOldNotHeld) {
			err = fmt.Errorf("%w: %q: the old lock: %w", ErrLost, l.Name(), oneLine{err})
			l.end(err)
			return err
		}
		return fmt.Errorf("fencebridge: refresh %q: the old lock: %w", l.Name(), oneLine{err})
	}
	l.oldTimer.Reset(time.Until(l.old.Until()))
	return nil
}

// Reissue gives the lease a new token above floor (see lease.Lease.Reissue);
// the old lock has no token.
func (l *Lock) Reissue(ctx context.Context, floor uint64) (fence.Token, error) {
	if l == nil {
		return fence.Token{}, fmt.Errorf("%w: nil lock", ErrInvalid)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return fence.Token{}, fmt.Errorf("fencebridge: reissue %q: %w", l.Name(), err)
	}
	return l.lease.Reissue(ctx, floor)
}

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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	l.oldTimer.Stop()
	lerr := l.lease.Release(ctx)
	l.end(l.lease.Err()) // lease.ErrReleased, or the loss found first
	oerr := l.old.Unlock(ctx)
	switch {
	case lerr != nil && oerr != nil:
		return fmt.Errorf("fencebridge: release: %w; the old lock: %w", oneLine{lerr}, oneLine{oerr})
	case lerr != nil:
		return fmt.Errorf("fencebridge: release: %w", oneLine{lerr})
	case oerr != nil:
		return fmt.Errorf("fencebridge: release: the old lock: %w", oneLine{oerr})
	}
	return nil
}

// keepAlive refreshes the Lock every interval until it ends.
func (l *Lock) keepAlive(interval, ttl time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(l.ctx, interval)
			_ = l.Refresh(ctx, ttl) // a loss ends the Lock; another failure waits for the next tick
			cancel()
		}
	}
}
