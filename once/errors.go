package once

import (
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

var (
	// ErrDone is the sentinel behind a [DoneError]: a run of the job
	// completed in this period already, so this one must not start.
	ErrDone error = sentinel.New("once: already done this period", nil)

	// ErrNotClaimed is returned by [Claim.Complete] when Redis has no claim
	// of this token to complete: the claim's key expired (a job that ran
	// for more than twice its period plus an hour), or it was deleted.
	ErrNotClaimed error = sentinel.New("once: no claim to complete", nil)

	// ErrInvalid is returned, before any I/O, for bad input: a nil client,
	// context, lease or job, a method called on a nil Tracker or Claim, a
	// period that is not positive, above MaxPeriod or not longer than the
	// tolerance, an invalid token (Seq 0 included: a lease without a
	// counter). It wraps lease.ErrInvalid.
	ErrInvalid error = sentinel.New("once: invalid argument", lease.ErrInvalid)
)

func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }

// DoneError reports that a run of the job completed in this period: Name is
// done until Until, an instant of the Redis server's clock.
type DoneError struct {
	// Name is the job's lock name.
	Name string
	// Until is when the next run may claim the job, by the server's clock.
	Until time.Time
	// Now is the server's clock when the claim was refused.
	Now time.Time
}

func (e *DoneError) Error() string {
	return fmt.Sprintf("once: %q already done this period: next run from %s by the Redis server's clock (%v from now)",
		e.Name, e.Until.UTC().Format(time.RFC3339Nano), e.Until.Sub(e.Now).Round(time.Millisecond))
}

// Unwrap returns ErrDone.
func (e *DoneError) Unwrap() error { return ErrDone }
