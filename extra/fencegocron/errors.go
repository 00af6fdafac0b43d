package fencegocron

import (
	"errors"

	"github.com/fencelock/fencelock/lease"
)

var (
	// ErrInvalid is returned, before any I/O, for bad input: a nil client,
	// tracker, election, scheduler or function, a job without a name, a
	// schedule without a period of at least MinPeriod. It matches
	// lease.ErrInvalid.
	ErrInvalid error = &baseError{"fencegocron: invalid argument", lease.ErrInvalid}

	// ErrNotLeader is returned by IsLeader, and by an Elector's job, when
	// this process does not lead.
	ErrNotLeader = errors.New("fencegocron: not the leader")

	// ErrNoLock is returned by a Locker's job when gocron ran it without
	// taking the job's lock first (an Elector or another Locker set on the
	// scheduler or the job takes precedence): the job does not run, since
	// it would have no token.
	ErrNoLock = errors.New("fencegocron: the job ran without its lock")
)

// baseError is a sentinel with its own message that also matches the core
// package's sentinel of the same meaning.
type baseError struct {
	msg  string
	base error
}

func (e *baseError) Error() string { return e.msg }
func (e *baseError) Unwrap() error { return e.base }
