package sqlverifier

import (
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/verifier"
)

// ErrInvalid is returned, before any I/O, for bad input: a nil or typed-nil
// DB or Querier (a nil *sql.DB, say), an unknown Dialect, a nil function or
// context, a nil option, a bad table name, bad Move arguments, or a method
// called on a nil *Verifier or on one not made by [New]. Nothing was
// changed. It wraps [verifier.ErrInvalid], so errors.Is(err,
// verifier.ErrInvalid) holds as well.
var ErrInvalid error = sentinel.New("sqlverifier: invalid argument", verifier.ErrInvalid)

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }
