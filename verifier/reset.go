package verifier

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

// Resetter is implemented by verifiers whose high-water an operator can
// set back: the way out when a resource's high-water was poisoned, by a
// made-up token (Seq fence.MaxSeq locks every real holder out for good:
// no counter can pass it) or by a token of another deployment.
//
// Reset sets resource's high-water to to.Seq and to.Holder and binds the
// resource to lock to.Key, whatever they were before: higher, lower,
// another lock, or none. It lowers the high-water on purpose, so tokens
// between to and the old high-water are accepted again. to.Holder may be
// "" (no holder): tokens of Seq to.Seq are then refused as conflicts, and
// higher ones accepted. Invalid arguments return an error wrapping
// ErrInvalid (ErrInvalidResource for the resource name), before any I/O.
//
// Take to from the lock's state at the time of the reset, never from a
// guess (`fencelock reset-highwater` does this): if the lock is held, its
// holder's token, so that the holder keeps writing; if it is free, its
// counter (the last Seq issued) with no holder. Either way every token
// the lock issued before is refused (but the live holder's), and the
// next acquisition's is accepted. A paused holder with an older token
// stays refused; a holder with a token newer than to (it acquired after
// the lock was read) is accepted.
type Resetter interface {
	Reset(ctx context.Context, resource string, to fence.Token) error
}

// ValidateReset checks the inputs of a Reset before any I/O: the resource
// name (an error wrapping ErrInvalidResource), and to, whose Key must be a
// valid lock name, Seq 1..fence.MaxSeq, and Holder "" or a valid holder
// (an error wrapping ErrInvalid).
func ValidateReset(resource string, to fence.Token) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	if to.Holder == "" {
		to.Holder = "none" // "" means no holder: check the rest
	}
	if err := to.Validate(); err != nil {
		return fmt.Errorf("%w: Reset %q: %w", ErrInvalid, resource, err)
	}
	return nil
}
