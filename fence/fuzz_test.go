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
		"9007199254740991:x:a%20b:c%25d%01%C3%A9", "1:h:%00",
		"3:uq/k/OcDD3u9qM13HjEpCQ==:reports/nightly", "3:lxSqbzSJFl5PtL0bv2gjXg:k", "1:a=b+c/d:k", "1:a b:k", "1:a%41:k", "1:h:a%00b", "1:h:%FF", "1:h:%C3", "1:h:%ED%A0%80", "1:h:%C3%A9",
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
		if err := tok.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted %+v, which Validate rejects: %v", s, tok, err)
		}
	})
}

// FuzzRoundTrip checks that every valid token survives String then Parse,
// that no invalid one (a holder with ':' or ',', say) comes back as itself,
// and that a token whose only fault is its key (a NUL, invalid UTF-8, a
// brace...) does not come back from its text form at all: the parser
// rejects what Validate rejects.
func FuzzRoundTrip(f *testing.F) {
	f.Add("k", uint64(1), "h")
	f.Add("a b:c%d\té\x01", MaxSeq, h1)
	f.Add("{x}", uint64(0), "")
	f.Add("a\x00b", uint64(1), "h")
	f.Add("a\xffb", uint64(1), "h")
	f.Add("\xed\xa0\x80", uint64(1), "h")
	f.Add("reports/nightly", uint64(3), "uq/k/OcDD3u9qM13HjEpCQ==") // go-redsync/redsync's holder values
	f.Add("k", uint64(3), "+/=")
	f.Add("k", uint64(3), "a:b")
	f.Add("k", uint64(3), "a,b")
	f.Fuzz(func(t *testing.T, key string, seq uint64, holder string) {
		tok := Token{Key: key, Seq: seq, Holder: holder}
		if err := tok.Validate(); err != nil {
			if back, perr := Parse(tok.String()); perr == nil && back == tok {
				t.Fatalf("Parse(%q) gives back %+v, which Validate rejects: %v", tok.String(), tok, err)
			}
			if ValidateKey(key) == nil || (Token{Key: "k", Seq: seq, Holder: holder}).Validate() != nil {
				return // not (only) the key's fault
			}
			if back, perr := Parse(tok.String()); perr == nil {
				t.Fatalf("Parse(%q) = %+v, but Validate rejects %+v: %v", tok.String(), back, tok, err)
			}
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
