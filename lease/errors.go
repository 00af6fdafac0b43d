package lease

import (
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/sentinel"
)

// Sentinel errors of every lease kind. Test for them with errors.Is.
var (
	// ErrNotAcquired is returned when the lock is held by another holder:
	// at once by TryAcquire, and by Acquire when its context ends first (then
	// the context's error is in the chain too).
	ErrNotAcquired error = sentinel.New("lease: not acquired", nil)

	// ErrLost means the lease is no longer held: its local deadline passed,
	// or Redis (a majority of the nodes) no longer has the lock under this
	// holder. The fencing token is stale.
	ErrLost error = sentinel.New("lease: lost", nil)

	// ErrReleased is a released lease's Err.
	ErrReleased error = sentinel.New("lease: released", nil)

	// ErrNotReplicated is returned by an acquire with WithReplicaAck when
	// fewer replicas than asked acknowledged the lock in time; the lock was
	// released again.
	ErrNotReplicated error = sentinel.New("lease: not acknowledged by enough replicas", nil)

	// ErrInvalid is returned, before any I/O, for bad input: a nil client, an
	// empty, over-long or braced lock name, a ttl below one millisecond, a bad
	// holder id or option.
	ErrInvalid error = sentinel.New("lease: invalid argument", nil)

	// ErrPoisoned is returned by Advance, Reissue (and so heal.Write) and
	// a quorum-fenced Redlock acquire when they would lift a counter more
	// than 24h above the server's clock: the high-water is forged or
	// mistyped, and would retire the lock. The counter is left as it was.
	ErrPoisoned error = protocol.ErrPoisoned
)

// HeldError is returned by TryAcquire on one Redis when another holder has
// the lock, or when a fair lock is free but reserved for the waiters queued
// ahead. It wraps ErrNotAcquired.
type HeldError struct {
	Name      string
	Remaining time.Duration // the holder's remaining ttl (<= 0: unknown); when Queued, 0 or a short delay before trying again
	Queued    bool          // free, but reserved for fair waiters queued ahead
	// Permits is, for a semaphore's TryAcquire, its N (every permit is
	// held, and Remaining is until the first one's ttl ends); 0 for a lock.
	Permits int
}

func (e *HeldError) Error() string {
	switch {
	case e.Queued && e.Permits > 0:
		return fmt.Sprintf("lease: not acquired: a permit of %q is free but reserved for the waiters queued ahead", e.Name)
	case e.Permits > 0 && e.Remaining < 0:
		return fmt.Sprintf("lease: not acquired: all %d permits of %q are held, for a time unknown (their keys may have no ttl)", e.Permits, e.Name)
	case e.Permits > 0:
		return fmt.Sprintf("lease: not acquired: all %d permits of %q are held; the first ttl ends in %v", e.Permits, e.Name, e.Remaining)
	}
	if e.Queued {
		return fmt.Sprintf("lease: not acquired: %q is reserved for the waiters queued ahead", e.Name)
	}
	if e.Remaining < 0 {
		return fmt.Sprintf("lease: not acquired: %q is held by another holder, for a time unknown (its key may have no ttl, and never expire)", e.Name)
	}
	return fmt.Sprintf("lease: not acquired: %q is held by another holder for %v", e.Name, e.Remaining)
}

// Unwrap returns ErrNotAcquired.
func (e *HeldError) Unwrap() error { return ErrNotAcquired }

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }

// joinErr joins errors on one line (see sentinel.Join).
func joinErr(errs ...error) error { return sentinel.Join(errs...) }
