package fence

import (
	"fmt"
	"strconv"
	"strings"
)

// The text form of a token is
//
//	SEQ:HOLDER:KEY
//
// SEQ is decimal without leading zeros, HOLDER is the holder id as is (it
// never holds ':', ',' or '%': see ValidateHolder), and
// KEY is the lock name with every byte outside printable ASCII (and '%' and
// ',') written as %XX with upper-case hex. A comma is escaped because HTTP
// joins repeated header fields with commas: the text form of a token never
// contains one, so a comma-joined Fence-Token header cannot pass for a
// token whose key has a comma. For example
//
//	42:0b6c9a8e-6f5e-4c1a-9a43-61c0b2f5d3a1:orders/17
//
// The form is lossless, safe in HTTP headers and logs, and parsed strictly:
// only the exact string that String produces is accepted.

// String returns the text form of t. The zero Token formats as "".
func (t Token) String() string {
	if t.IsZero() {
		return ""
	}
	var b strings.Builder
	b.Grow(20 + 2 + len(t.Holder) + len(t.Key))
	b.WriteString(seqString(t.Seq))
	b.WriteByte(':')
	b.WriteString(t.Holder)
	b.WriteByte(':')
	escapeKey(&b, t.Key)
	return b.String()
}

// MarshalText implements encoding.TextMarshaler. It fails for a token that
// does not pass Validate, so no invalid token is written out.
func (t Token) MarshalText() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with the rules of Parse.
func (t *Token) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// Parse reads a token in the form String produces. Anything else (empty,
// negative, leading zeros, overflow past MaxSeq, a bad holder, a bad escape,
// a non-canonical escape, a key that ValidateKey rejects, such as one whose
// escapes spell a NUL or invalid UTF-8, or more than MaxTextLen bytes) is an
// error that wraps ErrMalformed; Parse never returns a partial token with a
// nil error. Parse accepts exactly the text forms of the tokens that pass
// Validate.
func Parse(s string) (Token, error) {
	if s == "" {
		return Token{}, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(s) > MaxTextLen {
		return Token{}, fmt.Errorf("%w: %d bytes, the limit is %d", ErrMalformed, len(s), MaxTextLen)
	}
	seqText, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Token{}, fmt.Errorf("%w: want SEQ:HOLDER:KEY", ErrMalformed)
	}
	holder, keyText, ok := strings.Cut(rest, ":")
	if !ok {
		return Token{}, fmt.Errorf("%w: want SEQ:HOLDER:KEY", ErrMalformed)
	}
	seq, err := parseSeq(seqText)
	if err != nil {
		return Token{}, err
	}
	key, err := unescapeKey(keyText)
	if err != nil {
		return Token{}, err
	}
	t := Token{Key: key, Seq: seq, Holder: holder}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// ParseSeq reads a decimal Seq strictly: digits only, no sign, no leading
// zero, 1..MaxSeq. Verifiers use it for values that travel without a token.
func ParseSeq(s string) (uint64, error) { return parseSeq(s) }

func parseSeq(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty seq", ErrMalformed)
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: seq %q has a leading zero", ErrMalformed, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: seq %q is not a decimal number", ErrMalformed, s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > MaxSeq {
		return 0, fmt.Errorf("%w: seq %q exceeds 2^53-1", ErrMalformed, s)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: seq must be at least 1", ErrMalformed)
	}
	return n, nil
}

const hexDigits = "0123456789ABCDEF"

// plainKeyByte reports whether c is written as itself in a key's text form.
func plainKeyByte(c byte) bool { return c > ' ' && c < 0x7f && c != '%' && c != ',' }

func escapeKey(b *strings.Builder, key string) {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plainKeyByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func unescapeKey(s string) (string, error) {
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if !plainKeyByte(s[i]) {
				return "", fmt.Errorf("%w: key has an unescaped byte 0x%02x at %d", ErrMalformed, s[i], i)
			}
		}
		return s, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !plainKeyByte(c) {
				return "", fmt.Errorf("%w: key has an unescaped byte 0x%02x at %d", ErrMalformed, c, i)
			}
			out = append(out, c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: key has a truncated escape at %d", ErrMalformed, i)
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("%w: key has a bad escape %q at %d", ErrMalformed, s[i:i+3], i)
		}
		d := byte(hi<<4 | lo)
		if plainKeyByte(d) {
			// Only one spelling per key: a byte that may stand as itself must.
			return "", fmt.Errorf("%w: key escapes a plain byte %q at %d", ErrMalformed, s[i:i+3], i)
		}
		out = append(out, d)
		i += 2
	}
	return string(out), nil
}

// unhex decodes an upper-case hex digit, or returns -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
