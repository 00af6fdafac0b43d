package fencebridge

import (
	"errors"

	"github.com/fencelock/fencelock/lease"
)

var (
	// ErrInvalid is returned (wrapped), before any I/O, for a nil argument,
	// a lock name that fencelock refuses, or a ttl below 1ms. It matches
	// lease.ErrInvalid.
	ErrInvalid error = &baseError{"fencebridge: invalid argument", lease.ErrInvalid}

	// ErrNotAcquired is returned (wrapped, with the cause) when the old
	// lock or fencelock's could not be taken, or the old one ran out before
	// fencelock's was taken. It matches lease.ErrNotAcquired.
	ErrNotAcquired error = &baseError{"fencebridge: not acquired", lease.ErrNotAcquired}

	// ErrLost is a Lock's Err when the old lock ran out or was found gone
	// (fencelock's lease ending gives lease.ErrLost itself). It matches
	// lease.ErrLost.
	ErrLost error = &baseError{"fencebridge: lost", lease.ErrLost}

	// ErrOldNotHeld is returned (wrapped) by an OldLock's Unlock or Refresh
	// when the old lock had already expired or passed to another holder.
	ErrOldNotHeld = errors.New("fencebridge: the old lock was not held")
)

// baseError is a sentinel with its own message that also matches the
// lease package's sentinel of the same meaning.
type baseError struct {
	msg  string
	base error
}

func (e *baseError) Error() string { return e.msg }
func (e *baseError) Unwrap() error { return e.base }
