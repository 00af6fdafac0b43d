package election

import (
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrNoLeader is returned by Leader when nobody leads.
	ErrNoLeader error = sentinel.New("election: no leader", nil)

	// ErrInvalid is returned, before any I/O, for bad input: a nil client,
	// context or term, a bad name, ttl or option. It also matches
	// lease.ErrInvalid.
	ErrInvalid error = sentinel.New("election: invalid argument", lease.ErrInvalid)
)

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }
