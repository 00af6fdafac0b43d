package verifier

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fencelock/fencelock/fence"
)

// Verifier is the part every fencelock verifier shares: Claim.
//
// Claim checks tok against the high-water stored for resource and, in the
// same atomic step, raises the high-water to tok when it is accepted. It
// returns nil when tok is accepted; when it is refused, an error for which
// errors.Is(err, ErrStale) holds (a *StaleError) if it is older than the
// high-water or conflicts with it, or errors.Is(err, ErrForeign) (a
// *ForeignError) if it belongs to another lock than the resource's; an
// error wrapping
// fence.ErrMalformed for an invalid token, an error wrapping
// ErrInvalidResource for an unusable resource name, and any other error when
// the storage could not be asked; in all those cases nothing was changed.
//
// A Claim on its own protects nothing: the write must be fenced too. Claim
// before reading (so that an older holder that read earlier cannot land its
// write afterwards), then make the write in the same atomic step as a check
// of the same token: a verifier's transaction helper, a fenced script, or
// [Memory.Do]. Each implementation offers such a step beside Claim.
type Verifier interface {
	Claim(ctx context.Context, resource string, tok fence.Token) error
}

// ErrStale is the sentinel behind every token refused by the order rule
// (older than the high-water, or the same Seq from another holder). Test
// for it with errors.Is; use errors.As with *StaleError for the details. A
// token of another lock is refused with [ErrForeign] instead.
var ErrStale = errors.New("verifier: stale token")

// ErrInvalid is returned, before any I/O, for an unusable argument: a nil
// (or typed-nil) verifier, client, function or context, a nil option, an
// option given a bad value, or a method called on a nil or zero verifier
// that was not made by its constructor. Nothing was changed. pgverifier and
// redisverifier return their own ErrInvalid, which wraps this one, so
// errors.Is(err, verifier.ErrInvalid) holds for every verifier.
var ErrInvalid = errors.New("verifier: invalid argument")

// ErrInvalidResource is returned (wrapped) for a resource name no verifier
// accepts; see [ValidateResource].
var ErrInvalidResource = errors.New("verifier: invalid resource name")

// StaleError reports a token that a resource did not accept: either an older
// Seq than the highest the resource has accepted, or the same Seq presented
// by another holder (a conflict: the lock's counter went backwards).
//
// Highest lets the caller heal: lifting the lock's counter to at least
// Highest (lease's Advance) makes the next acquisition's token acceptable.
type StaleError struct {
	// Resource is the resource the token was presented for.
	Resource string
	// Token is the rejected token.
	Token fence.Token
	// Highest is the highest Seq the resource has accepted.
	Highest uint64
	// HighestHolder is the holder that presented Highest; "" if unknown.
	HighestHolder string
}

// Conflict reports whether the token was rejected because another holder
// already presented the same Seq, rather than because it is older.
func (e *StaleError) Conflict() bool { return e != nil && e.Token.Seq == e.Highest }

func (e *StaleError) Error() string {
	if e == nil {
		return "verifier: stale token (nil *StaleError)"
	}
	if e.Conflict() {
		return fmt.Sprintf("verifier: conflicting token for resource %q: seq %d was already accepted from holder %q, not %q",
			e.Resource, e.Token.Seq, e.HighestHolder, e.Token.Holder)
	}
	return fmt.Sprintf("verifier: stale token for resource %q: seq %d (holder %q), the highest accepted is %d",
		e.Resource, e.Token.Seq, e.Token.Holder, e.Highest)
}

// Is makes errors.Is(err, ErrStale) hold.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

// MaxResourceLen is the longest resource name, in bytes.
const MaxResourceLen = 1024

// ValidateResource reports why name cannot be a resource name, or nil. A
// name must be 1..MaxResourceLen bytes of valid UTF-8 without NUL bytes
// (PostgreSQL text cannot hold NUL). Quotes and other punctuation are fine:
// verifiers pass names as bind parameters or script arguments, never as
// code. The error wraps ErrInvalidResource.
func ValidateResource(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidResource)
	case len(name) > MaxResourceLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidResource, len(name), MaxResourceLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidResource)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%w: NUL byte at %d", ErrInvalidResource, i)
		}
	}
	return nil
}

// ValidateClaim checks the inputs of a Claim before any I/O: the resource
// name and the token. Verifier implementations call it first.
func ValidateClaim(resource string, tok fence.Token) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	if err := tok.Validate(); err != nil {
		return fmt.Errorf("verifier: resource %q: %w", resource, err)
	}
	return nil
}

// ErrAhead is wrapped by the error for a token refused by a clock bound
// (see [CheckClockBound]): its Seq is further above the verifier's clock
// than any counter that follows the clock can be.
var ErrAhead = errors.New("verifier: token too far above the clock")

// CheckClockBound returns an error wrapping [ErrAhead] when bound > 0 and
// tok.Seq is more than bound above now, read as microseconds since the Unix
// epoch (the unit of a lease's clock floor, lease.WithClockFloor); nil
// otherwise. Every verifier's clock bound option calls it before any I/O,
// so a forged token with a huge Seq cannot raise a high-water beyond reach
// of the real counter. Use it only where the lock's counters follow the
// clock: a bound that counters do not reach is harmless, a counter already
// above it is refused (see `fencelock repair-counter`).
func CheckClockBound(resource string, tok fence.Token, bound time.Duration, now time.Time) error {
	if bound <= 0 {
		return nil
	}
	limit := uint64(now.UnixMicro()) + uint64(bound/time.Microsecond)
	if tok.Seq <= limit {
		return nil
	}
	return fmt.Errorf("%w: resource %q: token %v is more than %v above this host's clock (Seq limit %d now)",
		ErrAhead, resource, tok, bound, limit)
}

// ErrForeign is the sentinel behind every token refused because it belongs
// to another lock than the one the resource is bound to. Test for it with
// errors.Is; use errors.As with *ForeignError for the details. It is not
// ErrStale: no newer token of the same lock would be accepted either, and
// healing (advancing the token's counter) cannot help.
var ErrForeign = errors.New("verifier: token of a foreign lock")

// ForeignError reports a token refused because the resource is bound to
// another lock. A verifier binds a resource to the lock (fence.Token.Key) of
// the first token it accepts for it, because tokens of different locks come
// from different counters and cannot be compared: were they compared, a
// token from a busy lock would lock the resource's rightful lock out for
// good. Moving a resource to another lock is an explicit step (each
// verifier's Move), never a side effect of a Claim.
type ForeignError struct {
	// Resource is the resource the token was presented for.
	Resource string
	// Token is the refused token; Token.Key is the foreign lock.
	Token fence.Token
	// Lock is the lock the resource is bound to.
	Lock string
}

func (e *ForeignError) Error() string {
	if e == nil {
		return "verifier: token of a foreign lock (nil *ForeignError)"
	}
	if e.Token.Seq == 0 { // a refused Move: Token holds only the lock it moved from
		return fmt.Sprintf("verifier: resource %q is bound to lock %q, not to %q", e.Resource, e.Lock, e.Token.Key)
	}
	return fmt.Sprintf("verifier: resource %q is bound to lock %q, not to the token's lock %q (seq %d, holder %q)",
		e.Resource, e.Lock, e.Token.Key, e.Token.Seq, e.Token.Holder)
}

// Is makes errors.Is(err, ErrForeign) hold.
func (e *ForeignError) Is(target error) bool { return target == ErrForeign }

// Unwrap returns ErrForeign.
func (e *ForeignError) Unwrap() error { return ErrForeign }

// Foreign reports true; it lets packages that cannot import this one (the
// hooks) recognise the refusal.
func (e *ForeignError) Foreign() bool { return e != nil }

// Mover is implemented by verifiers that can move a resource to another
// lock. Move binds resource to lock to and forgets its high-water (tokens
// of to are not comparable with those of from), provided the resource is
// bound to from, or is not bound to any lock yet. Otherwise it returns a
// *ForeignError whose Lock is the current binding and changes nothing. from
// and to must be valid, distinct lock names (fence.ValidateKey), or Move
// returns an error wrapping ErrInvalid.
//
// Move while a holder of from may still write is a mistake: its writes
// are refused from then on, which is the point, but a write it made just
// before is kept. Stop the old lock's users first.
type Mover interface {
	Move(ctx context.Context, resource, from, to string) error
}

// ValidateMove checks the inputs of a Move before any I/O.
func ValidateMove(resource, from, to string) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	for _, k := range []string{from, to} {
		if err := fence.ValidateKey(k); err != nil {
			return fmt.Errorf("%w: Move %q: %w", ErrInvalid, resource, err)
		}
	}
	if from == to {
		return fmt.Errorf("%w: Move %q: from and to are the same lock %q", ErrInvalid, resource, from)
	}
	return nil
}
