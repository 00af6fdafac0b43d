package fence

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerHolders returns holder values as go-redsync/redsync (standard base64
// of 16 random bytes, padded: "uq/k/OcDD3u9qM13HjEpCQ==") and
// bsm/redislock (URL base64, unpadded) generate them, so that '+', '/' and
// '=' all show up in some of them.
func peerHolders(t *testing.T) []string {
	t.Helper()
	out := []string{"uq/k/OcDD3u9qM13HjEpCQ==", "+/+/+/+/+/+/+/+/+/+/+w==", "lxSqbzSJFl5PtL0bv2gjXg"}
	for range 200 {
		b := make([]byte, 16)
		_, err := rand.Read(b)
		require.NoError(t, err)
		out = append(out, base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b))
	}
	return out
}

func TestValidateHolderAcceptsPeerValues(t *testing.T) {
	for _, h := range append(peerHolders(t), h1, "a", "A.b_c-d", strings.Repeat("=", MaxHolderLen)) {
		require.NoError(t, ValidateHolder(h), "%q", h)
		tok := Token{Key: "reports/nightly", Seq: 7, Holder: h}
		back, err := Parse(tok.String())
		require.NoError(t, err, "%q", tok.String())
		assert.Equal(t, tok, back, "the text form is lossless")

		hdr := http.Header{}
		SetHeader(hdr, tok)
		got, ok, err := FromHeader(hdr)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, tok, got, "the header carries it unchanged")

		b, err := tok.MarshalText()
		require.NoError(t, err)
		var u Token
		require.NoError(t, u.UnmarshalText(b))
		assert.Equal(t, tok, u)
	}
}

func TestValidateHolderRefusesWithReason(t *testing.T) {
	for id, want := range map[string]string{
		"":                                  "empty holder",
		strings.Repeat("a", MaxHolderLen+1): "65 bytes, the limit is 64",
		"a:b":                               `byte ":" at 1`,
		"ab,c":                              `byte "," at 2`,
		"a b":                               `byte " " at 1`,
		"a%41":                              `byte "%" at 1`,
		"é":                                 `byte "\xc3" at 0`,
		"a\x00":                             `byte "\x00" at 1`,
		"tab\t":                             `byte "\t" at 3`,
		"{x}":                               `byte "{" at 0`,
	} {
		err := ValidateHolder(id)
		require.Error(t, err, "%q", id)
		assert.True(t, errors.Is(err, ErrMalformed), "%v", err)
		assert.Contains(t, err.Error(), want, "%q", id)
		assert.NotContains(t, err.Error(), "\n", "one line")
		if id != "" && len(id) <= MaxHolderLen {
			assert.Contains(t, err.Error(), "':' and ',' separate", "the error says why")
		}
	}
}

// TestHolderBytesNeverBreakTheTextForm checks every byte value: a byte
// ValidateHolder accepts makes a token that round-trips, and the
// separators and escape of the text form are never among them.
func TestHolderBytesNeverBreakTheTextForm(t *testing.T) {
	for c := 0; c < 256; c++ {
		h := "x" + string([]byte{byte(c)}) + "y"
		tok := Token{Key: "k", Seq: 1, Holder: h}
		if ValidateHolder(h) != nil {
			// Refused bytes would make the text form lossy: "1:x:y:k" reads
			// back as holder "x", key "y:k"; "x,y" splits in a header.
			back, err := Parse(tok.String())
			assert.True(t, err != nil || back != tok, "byte 0x%02x: a refused holder must not come back", c)
			continue
		}
		assert.NotContains(t, ":,%", string(rune(c)), "byte 0x%02x is accepted but is a separator", c)
		back, err := Parse(tok.String())
		require.NoError(t, err, "byte 0x%02x", c)
		assert.Equal(t, tok, back)
	}
}
