package fence

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

type ctxKey struct{}

// NewContext returns a copy of ctx that carries t. Storage code further down
// the call chain can read it back with FromContext and pass it to a verifier.
func NewContext(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the token stored in ctx by NewContext, if any.
func FromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(ctxKey{}).(Token)
	return t, ok && !t.IsZero()
}

// Header is the HTTP header that carries a token in its text form.
const Header = "Fence-Token"

// SetHeader writes t into h under Header, replacing any earlier value.
func SetHeader(h http.Header, t Token) {
	h.Set(Header, t.String())
}

// FromHeader reads the token in h. It returns ok=false and a nil error when
// the header is absent, and an error wrapping ErrMalformed when it is present
// but not a valid token, present more than once, or a comma-separated list
// (HTTP's way of joining repeated fields: "Fence-Token: a,b" is two tokens).
func FromHeader(h http.Header) (t Token, ok bool, err error) {
	vals := h.Values(Header)
	switch len(vals) {
	case 0:
		return Token{}, false, nil
	case 1:
	default:
		return Token{}, false, fmt.Errorf("%w: %d %s headers, want one", ErrMalformed, len(vals), Header)
	}
	if n := strings.Count(vals[0], ",") + 1; n > 1 {
		return Token{}, false, fmt.Errorf("%w: %s holds %d comma-separated values, want one token", ErrMalformed, Header, n)
	}
	t, err = Parse(vals[0])
	if err != nil {
		return Token{}, false, err
	}
	return t, true, nil
}
