package redisverifier

import (
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/verifier"
)

// ErrInvalid is returned, before any I/O, for bad input: a nil or typed-nil
// client (a nil *redis.Client, say), a nil context, a nil option, a bad
// prefix, a negative ttl, HSet values that are not field/value pairs, a data
// key that is the resource's own high-water key, or a method called on a
// nil *Verifier or *Script or on one not made by [New] or
// [Verifier.NewScript]. Nothing was changed. It wraps
// [verifier.ErrInvalid], so errors.Is(err, verifier.ErrInvalid) holds as
// well.
var ErrInvalid error = sentinel.New("redisverifier: invalid argument", verifier.ErrInvalid)

// invalid returns an error wrapping ErrInvalid.
func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }
