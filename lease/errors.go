package lease

import "github.com/fencelock/fencelock/internal/sentinel"

// Sentinel errors. Test for them with errors.Is; the errors of
// lease/redlock wrap them too.
var (
	// ErrNotAcquired is returned when the lock is held by another holder:
	// at once by TryAcquire, and by Acquire when its context ends first (then
	// the context's error is in the chain too).
	ErrNotAcquired error = sentinel.New("lease: not acquired", nil)

	// ErrLost means the lease is no longer held: its local deadline passed,
	// or Redis no longer has the lock under this holder (it expired, was
	// deleted, or another holder took it). The fencing token is stale.
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
)

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }
