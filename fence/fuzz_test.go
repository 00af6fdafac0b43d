package fence

import (
	"errors"
	"testing"
)

// FuzzParse checks that Parse never panics, that everything it accepts
// formats back to the very same string (one spelling per token), and that
// it fails only with ErrMalformed.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"1:h:k", "42:" + h1 + ":orders/17", "9007199254740991:x:a%20b:c%25d%00%C3%A9",
		"", ":", "::", "0:h:k", "01:h:k", "-1:h:k", "1:h:%41", "1:h:%4", "1:h:a{b}",
		"18446744073709551616:h:k", "1:h:\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrMalformed", s, err)
			}
			if !tok.IsZero() {
				t.Fatalf("Parse(%q) returned %+v with an error", s, tok)
			}
			return
		}
		if got := tok.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q", s, got)
		}
	})
}

// FuzzRoundTrip checks that every valid token survives String then Parse.
func FuzzRoundTrip(f *testing.F) {
	f.Add("k", uint64(1), "h")
	f.Add("a b:c%d\x00é", MaxSeq, h1)
	f.Add("{x}", uint64(0), "")
	f.Fuzz(func(t *testing.T, key string, seq uint64, holder string) {
		tok := Token{Key: key, Seq: seq, Holder: holder}
		if tok.Validate() != nil {
			return
		}
		back, err := Parse(tok.String())
		if err != nil {
			t.Fatalf("Parse(%q): %v", tok.String(), err)
		}
		if back != tok {
			t.Fatalf("round trip: %+v became %+v", tok, back)
		}
	})
}
