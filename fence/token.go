package fence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of a token's fields. They are enforced by [Token.Validate] and
// [Parse], and by the lease before any I/O.
const (
	// MaxSeq is the largest Seq a token may carry: 2^53-1. Lua numbers in
	// Redis are doubles, so a larger counter would lose precision, and the
	// value also fits a Postgres bigint.
	MaxSeq uint64 = 1<<53 - 1

	// MaxKeyLen is the longest lock name, in bytes.
	MaxKeyLen = 512

	// MaxHolderLen is the longest holder id, in bytes. A UUID takes 36.
	MaxHolderLen = 64

	// MaxTextLen bounds the text form of a token; Parse rejects longer input
	// before looking at it.
	MaxTextLen = 2 + 16 + 1 + MaxHolderLen + 1 + 3*MaxKeyLen
)

// ErrMalformed is returned (wrapped) for a token whose text form or fields
// are not valid. Test for it with errors.Is.
var ErrMalformed = errors.New("fence: malformed token")

// ErrBadKey is returned (wrapped) by ValidateKey for a string that cannot
// be a lock name. It wraps ErrMalformed, since a token with such a key is
// malformed, but its message names the lock name, not a token.
var ErrBadKey error = badKey{}

type badKey struct{}

func (badKey) Error() string { return "fence: bad lock name" }
func (badKey) Unwrap() error { return ErrMalformed }

// Token is a fencing token: proof that Holder held the lock Key when the
// lock's counter was at Seq.
//
// The zero Token means "no token" and is never valid.
type Token struct {
	// Key is the lock name the token was issued for.
	Key string
	// Seq is the value of the lock's counter at acquisition; it grows with
	// every acquisition of Key. Valid values are 1..MaxSeq.
	Seq uint64
	// Holder is the id of the lease that got the token: a random UUID, or
	// the id the caller chose (see [ValidateHolder] for what it may be). It
	// tells two holders apart if the counter ever went backwards.
	Holder string
}

// IsZero reports whether t is the zero Token.
func (t Token) IsZero() bool { return t == Token{} }

// Compare orders tokens by Seq only: it returns -1 if t.Seq < u.Seq, +1 if
// t.Seq > u.Seq and 0 when they are equal. A result of 0 does not mean the
// tokens are interchangeable; check [Token.Conflicts] too.
func (t Token) Compare(u Token) int {
	switch {
	case t.Seq < u.Seq:
		return -1
	case t.Seq > u.Seq:
		return 1
	}
	return 0
}

// Newer reports whether t was issued after u (t.Seq > u.Seq).
func (t Token) Newer(u Token) bool { return t.Seq > u.Seq }

// Conflicts reports whether t and u carry the same Seq but different
// holders: the counter went backwards and two leases got the same number.
// A verifier must not accept both.
func (t Token) Conflicts(u Token) bool { return t.Seq == u.Seq && t.Holder != u.Holder }

// Supersedes reports whether a storage that has already accepted u may
// accept t: t is newer, or it is the same token again (same Seq and Holder).
// This is the acceptance rule every verifier applies.
func (t Token) Supersedes(u Token) bool {
	return t.Seq > u.Seq || (t.Seq == u.Seq && t.Holder == u.Holder)
}

// Validate reports why t is not a usable token, or nil. The error wraps
// ErrMalformed.
func (t Token) Validate() error {
	if t.Seq == 0 {
		return fmt.Errorf("%w: seq must be at least 1", ErrMalformed)
	}
	if t.Seq > MaxSeq {
		return fmt.Errorf("%w: seq %d exceeds 2^53-1", ErrMalformed, t.Seq)
	}
	if err := ValidateKey(t.Key); err != nil {
		return err
	}
	return ValidateHolder(t.Holder)
}

// ValidateKey reports why key cannot be a lock name, or nil: it must be
// 1..MaxKeyLen bytes of valid UTF-8 without NUL bytes, and must not contain
// '{' or '}'. Braces delimit a Redis Cluster hash tag, and the lease wraps
// the name in one (PREFIX{NAME}) so that a lock's keys share a slot; a
// brace inside would cut or nest that tag. The key travels to every
// verifier's storage, and PostgreSQL text holds neither a NUL nor invalid
// UTF-8: such a key would get a lease but fail every check with a driver
// error. The error wraps ErrBadKey (and so ErrMalformed) and says what is
// wrong, where, and why.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrBadKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, the limit is %d", ErrBadKey, len(key), MaxKeyLen)
	}
	if i, what := badText(key); i >= 0 {
		return fmt.Errorf("%w %q: %s at byte %d, which PostgreSQL text (where verifiers store the name) cannot hold", ErrBadKey, key, what, i)
	}
	if i := strings.IndexAny(key, "{}"); i >= 0 {
		return fmt.Errorf("%w %q: %q at byte %d: braces delimit a Redis Cluster hash tag, and the lease wraps the name in one (PREFIX{NAME}), which a brace inside would cut or nest",
			ErrBadKey, key, key[i], i)
	}
	return nil
}

// badText returns the offset of the first byte of s that is a NUL or not
// part of valid UTF-8, and which of the two it is; -1 and "" if there is
// none.
func badText(s string) (int, string) {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c == 0 {
				return i, "a NUL byte"
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i, "invalid UTF-8"
		}
		i += n
	}
	return -1, ""
}

// ValidateHolder reports why id cannot be a holder id, or nil: it must be
// 1..MaxHolderLen bytes of ASCII letters, digits and "._-+/=". That takes
// UUIDs and the base64 values (standard or URL alphabet, padded or not) that
// go-redsync/redsync and bsm/redislock generate, so a holder id can be carried
// over from them. Every other byte is refused because of where a holder id
// goes: ':' separates it from the Seq in the lock's Redis value, in release
// messages and in a token's text form; ',' splits a repeated Fence-Token HTTP
// header; '%' is the text form's escape; spaces, control bytes and non-ASCII
// would break the one-line text form in logs and headers. The error wraps
// ErrMalformed and names the first bad byte and its offset.
func ValidateHolder(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty holder", ErrMalformed)
	}
	if len(id) > MaxHolderLen {
		return fmt.Errorf("%w: holder is %d bytes, the limit is %d", ErrMalformed, len(id), MaxHolderLen)
	}
	for i := 0; i < len(id); i++ {
		if !holderByte(id[i]) {
			return fmt.Errorf("%w: holder %q has byte %q at %d; a holder id is ASCII letters, digits and \"._-+/=\" (':' and ',' separate a token's fields and header values)",
				ErrMalformed, id, id[i:i+1], i)
		}
	}
	return nil
}

// holderByte reports whether c may appear in a holder id. The text form
// writes the holder as is, so none of these may be ':' (the field
// separator), ',' (the header separator) or '%' (the key's escape).
func holderByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '+' || c == '/' || c == '='
}

// seqString formats a Seq in decimal.
func seqString(n uint64) string { return strconv.FormatUint(n, 10) }
