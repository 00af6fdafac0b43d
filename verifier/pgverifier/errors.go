package pgverifier

import (
	"fmt"

	"github.com/fencelock/fencelock/verifier"
)

// ErrInvalid is returned, before any I/O, for bad input: a nil or typed-nil
// DB or Querier (a nil *pgx.Conn, say), a nil function or context, a nil
// option, a bad table name, or a method called on a nil *Verifier or on one
// not made by [New]. Nothing was changed. It wraps [verifier.ErrInvalid], so
// errors.Is(err, verifier.ErrInvalid) holds as well.
var ErrInvalid error = &sentinel{"pgverifier: invalid argument", verifier.ErrInvalid}

// sentinel is an error value with its own message that also matches the
// verifier's sentinel of the same meaning.
type sentinel struct {
	msg  string
	base error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.base }

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
