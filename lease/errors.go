package lease

import "errors"

var (
	// ErrNotAcquired is returned when the lock is held by another holder:
	// at once by TryAcquire, and by Acquire when its context ends first (then
	// the context's error is in the chain too).
	ErrNotAcquired = errors.New("lease: not acquired")

	// ErrLost means the lease is no longer held: its local deadline passed,
	// or Redis no longer has the lock under this holder (it expired, was
	// deleted, or another holder took it). The fencing token is stale.
	ErrLost = errors.New("lease: lost")

	// ErrReleased is a released lease's Err.
	ErrReleased = errors.New("lease: released")

	// ErrNotReplicated is returned by an acquire with WithReplicaAck when
	// fewer replicas than asked acknowledged the lock in time; the lock was
	// released again.
	ErrNotReplicated = errors.New("lease: not acknowledged by enough replicas")

	// ErrInvalid is returned, before any I/O, for bad input: a nil client, an
	// empty, over-long or braced lock name, a ttl below one millisecond, a bad
	// holder id or option.
	ErrInvalid = errors.New("lease: invalid argument")
)
