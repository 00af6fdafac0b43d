// Package sentinel makes the sentinel errors of packages layered on another
// (redlock on lease, the verifiers on verifier, heal on lease): each has its
// own message and also matches the base package's sentinel of the same
// meaning, so errors.Is(err, lease.ErrInvalid) holds for every package's
// ErrInvalid.
package sentinel

import (
	"fmt"
	"strings"
)

// Error is a sentinel error with its own message that wraps base.
type Error struct {
	msg  string
	base error
}

// New returns a sentinel with message msg that wraps base.
func New(msg string, base error) *Error { return &Error{msg: msg, base: base} }

func (e *Error) Error() string { return e.msg }

// Unwrap returns the base sentinel.
func (e *Error) Unwrap() error { return e.base }

// Wrapf returns an error that wraps err, with a formatted detail after it.
func Wrapf(err error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{err}, args...)...)
}

// Join joins errs as errors.Join does, nil ones dropped, but its message
// is one line: the parts separated by "; ", so that a log line stays one
// line. errors.Is and errors.As reach every part.
func Join(errs ...error) error {
	n := 0
	for _, e := range errs {
		if e != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	j := &joined{errs: make([]error, 0, n)}
	for _, e := range errs {
		if e != nil {
			j.errs = append(j.errs, e)
		}
	}
	return j
}

type joined struct{ errs []error }

func (j *joined) Error() string {
	s := ""
	for i, e := range j.errs {
		if i > 0 {
			s += "; "
		}
		s += strings.ReplaceAll(e.Error(), "\n", "; ")
	}
	return s
}

func (j *joined) Unwrap() []error { return j.errs }
