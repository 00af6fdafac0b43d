package fence

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const h1, h2 = "0b6c9a8e-6f5e-4c1a-9a43-61c0b2f5d3a1", "5d1f3c42-8a3e-4b8e-9a11-2f3b7c9d0e44"

func TestOrderAndConflict(t *testing.T) {
	a := Token{Key: "k", Seq: 5, Holder: h1}
	b := Token{Key: "k", Seq: 6, Holder: h2}
	c := Token{Key: "k", Seq: 5, Holder: h2}

	assert.Equal(t, -1, a.Compare(b))
	assert.Equal(t, 1, b.Compare(a))
	assert.Equal(t, 0, a.Compare(c))
	assert.True(t, b.Newer(a))
	assert.False(t, a.Newer(c))

	assert.True(t, a.Conflicts(c), "same seq, other holder is a conflict")
	assert.False(t, a.Conflicts(a))
	assert.False(t, a.Conflicts(b))

	assert.True(t, b.Supersedes(a))
	assert.True(t, a.Supersedes(a), "the same token again is accepted")
	assert.False(t, c.Supersedes(a), "conflict is rejected")
	assert.False(t, a.Supersedes(b), "older is rejected")
}

func TestTextForm(t *testing.T) {
	tok := Token{Key: "orders/17", Seq: 42, Holder: h1}
	assert.Equal(t, "42:"+h1+":orders/17", tok.String())

	odd := Token{Key: "a b:c%d\x01é,", Seq: MaxSeq, Holder: "x"}
	s := odd.String()
	assert.Equal(t, "9007199254740991:x:a%20b:c%25d%01%C3%A9%2C", s, "a comma in a key is escaped")
	back, err := Parse(s)
	require.NoError(t, err)
	assert.Equal(t, odd, back)

	assert.Equal(t, "", Token{}.String())
}

func TestParseRejects(t *testing.T) {
	long := strings.Repeat("k", MaxKeyLen+1)
	cases := map[string]string{
		"empty":            "",
		"no separators":    "42",
		"one separator":    "42:" + h1,
		"negative":         "-1:" + h1 + ":k",
		"plus":             "+1:" + h1 + ":k",
		"zero":             "0:" + h1 + ":k",
		"leading zero":     "01:" + h1 + ":k",
		"over 2^53-1":      "9007199254740992:" + h1 + ":k",
		"uint64 overflow":  "99999999999999999999999:" + h1 + ":k",
		"hex seq":          "0x10:" + h1 + ":k",
		"space in seq":     " 1:" + h1 + ":k",
		"empty holder":     "1::k",
		"bad holder":       "1:a b:k",
		"holder escape":    "1:a%41:k",
		"non-ASCII holder": "1:\xc3\xa9:k",
		"empty key":        "1:" + h1 + ":",
		"brace in key":     "1:" + h1 + ":a{b}",
		"raw space":        "1:" + h1 + ":a b",
		"raw comma":        "1:" + h1 + ":k,1:" + h1 + ":k",
		"lower hex":        "1:" + h1 + ":a%c3%a9",
		"escaped plain":    "1:" + h1 + ":%41",
		"truncated esc":    "1:" + h1 + ":a%2",
		"bad esc":          "1:" + h1 + ":a%ZZ",
		"escaped NUL":      "1:" + h1 + ":a%00b",
		"escaped 0xFF":     "1:" + h1 + ":a%FF",
		"cut UTF-8":        "1:" + h1 + ":a%C3",
		"surrogate":        "1:" + h1 + ":%ED%A0%80",
		"overlong UTF-8":   "1:" + h1 + ":%C0%AF",
		"key too long":     "1:" + h1 + ":" + long,
		"text too long":    strings.Repeat("9", MaxTextLen+1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			tok, err := Parse(in)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrMalformed), "%v", err)
			assert.True(t, tok.IsZero(), "no partial token on error")
		})
	}
}

func TestValidateKey(t *testing.T) {
	for _, ok := range []string{
		"k", "orders/17", "a b:c%d,", "\x01\t\n\x7f", "ümlaut ☃ 𝄞", "\uFFFD", "\uFFFF",
		strings.Repeat("k", MaxKeyLen), strings.Repeat("é", MaxKeyLen/2),
	} {
		assert.NoError(t, ValidateKey(ok), "%q", ok)
	}
	for key, msg := range map[string]string{
		"":                               "empty key",
		strings.Repeat("k", MaxKeyLen+1): "513 bytes",
		"{x}":                            `fence: bad lock name "{x}": '{' at byte 0: braces delimit a Redis Cluster hash tag`,
		"a}b":                            `'}' at byte 1`,
		"\x00":                           "a NUL byte at byte 0",
		"orders\x00":                     "a NUL byte at byte 6",
		"é\x00{":                         "a NUL byte at byte 2",
		"\xff":                           "invalid UTF-8 at byte 0",
		"ab\xc3":                         "invalid UTF-8 at byte 2", // cut short
		"é\xc3(":                         "invalid UTF-8 at byte 2",
		"x\xed\xa0\x80":                  "invalid UTF-8 at byte 1", // a UTF-16 surrogate
		"\xc0\xaf":                       "invalid UTF-8 at byte 0", // overlong '/'
		"\xf4\x90\x80\x80":               "invalid UTF-8 at byte 0", // past U+10FFFF
	} {
		err := ValidateKey(key)
		require.Error(t, err, "%q", key)
		assert.ErrorIs(t, err, ErrMalformed, "%q", key)
		assert.ErrorIs(t, err, ErrBadKey, "%q", key)
		assert.ErrorContains(t, err, msg, "%q", key)
		assert.NotContains(t, err.Error(), "malformed token", "%q: a lock name is not a token", key)

		tok := Token{Key: key, Seq: 1, Holder: h1}
		assert.ErrorIs(t, tok.Validate(), ErrMalformed, "Validate, %q", key)
		_, err = tok.MarshalText()
		assert.ErrorIs(t, err, ErrMalformed, "MarshalText, %q", key)
		back, err := Parse(tok.String())
		assert.ErrorIs(t, err, ErrMalformed, "Parse(%q)", tok.String())
		assert.True(t, back.IsZero())
	}
}

func TestMarshalText(t *testing.T) {
	_, err := Token{}.MarshalText()
	assert.ErrorIs(t, err, ErrMalformed)

	tok := Token{Key: "k", Seq: 7, Holder: h2}
	b, err := tok.MarshalText()
	require.NoError(t, err)
	var got Token
	require.NoError(t, got.UnmarshalText(b))
	assert.Equal(t, tok, got)
	assert.ErrorIs(t, got.UnmarshalText([]byte("junk")), ErrMalformed)
	assert.Equal(t, tok, got, "failed unmarshal leaves the token alone")
}

func TestContextAndHeader(t *testing.T) {
	tok := Token{Key: "k", Seq: 3, Holder: h1}
	_, ok := FromContext(context.Background())
	assert.False(t, ok)
	got, ok := FromContext(NewContext(context.Background(), tok))
	assert.True(t, ok)
	assert.Equal(t, tok, got)

	h := http.Header{}
	_, ok, err := FromHeader(h)
	assert.False(t, ok)
	assert.NoError(t, err)

	SetHeader(h, tok)
	got, ok, err = FromHeader(h)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, tok, got)

	h.Add(Header, tok.String())
	_, _, err = FromHeader(h)
	assert.ErrorIs(t, err, ErrMalformed, "two headers are ambiguous")

	// HTTP joins repeated fields with commas; a proxy may have done so.
	h.Set(Header, tok.String()+","+tok.String())
	_, ok, err = FromHeader(h)
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrMalformed, "a comma-joined header is two tokens")
	assert.ErrorContains(t, err, "2 comma-separated values")

	odd := Token{Key: "a,b", Seq: 4, Holder: h2}
	SetHeader(h, odd)
	got, ok, err = FromHeader(h)
	require.NoError(t, err, "a key with a comma travels escaped")
	assert.True(t, ok)
	assert.Equal(t, odd, got)

	h.Set(Header, "nope")
	_, ok, err = FromHeader(h)
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrMalformed)
}
