package verifiertest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
)

// This file holds the tests of one lock per resource: foreign tokens,
// claim before read, and Move.

// TokOf returns a token of another lock than the suite's.
func TokOf(lock string, seq uint64, holder string) fence.Token {
	return fence.Token{Key: lock, Seq: seq, Holder: holder}
}

// RequireForeign asserts that err is a *ForeignError for tok on resource
// bound to lock, and not a stale-token error.
func RequireForeign(t testing.TB, err error, resource string, tok fence.Token, lock string) {
	t.Helper()
	require.ErrorIs(t, err, verifier.ErrForeign)
	assert.NotErrorIs(t, err, verifier.ErrStale, "a foreign token is not stale: no newer token of its lock would do")
	var fe *verifier.ForeignError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, resource, fe.Resource, "resource in the error")
	assert.Equal(t, tok, fe.Token, "token in the error")
	assert.Equal(t, lock, fe.Lock, "bound lock in the error")
}

// ForeignLock checks that a resource is bound to the lock of the first
// token it accepted: a token of another lock is refused with a
// *ForeignError whatever its Seq, through Claim and through Write, and
// changes nothing; the rightful lock goes on as before. A token whose lock
// name is malformed (a NUL, invalid UTF-8) is refused as malformed
// (fence.ErrMalformed) before any I/O, not as foreign, and never with the
// storage's own error about the bytes.
func ForeignLock(t *testing.T, h Harness) {
	ctx := t.Context()
	for _, path := range []string{"Claim", "Write"} {
		t.Run(path, func(t *testing.T) {
			res := Resource(t, "r")
			require.NoError(t, h.Write(ctx, res, Tok(5, "a")))
			write := func(tok fence.Token) error {
				if path == "Claim" {
					return h.V.Claim(ctx, res, tok)
				}
				return h.Write(ctx, res, tok)
			}
			for _, tok := range []fence.Token{
				TokOf("other", 6, "b"),   // newer by Seq
				TokOf("other", 5, "a"),   // the same Seq and holder
				TokOf("other", 1, "b"),   // older
				TokOf(Lock+"/", 99, "a"), // a lock whose name extends the bound one
				TokOf(Lock[1:], 99, "a"), // and one that is a suffix of it
			} {
				RequireForeign(t, write(tok), res, tok, Lock)
				requireHighest(t, h, res, 5, "a")
			}
			assert.Equal(t, 1, logLen(t, h, res), "no foreign write landed")
			require.NoError(t, write(Tok(6, "b")), "the bound lock goes on")
			requireHighest(t, h, res, 6, "b")
		})
	}
	// A malformed token is malformed whatever lock the resource is bound
	// to: refused before any I/O with fence.ErrMalformed, never a
	// *ForeignError and never the storage's complaint about the bytes.
	t.Run("MalformedKey", func(t *testing.T) {
		res := Resource(t, "r")
		require.NoError(t, h.Write(ctx, res, Tok(5, "a")))
		for name, key := range map[string]string{
			"NUL":           "other\x00",
			"NUL only":      "\x00",
			"invalid UTF-8": "other\xff",
			"truncated":     "other\xc3",
		} {
			tok := TokOf(key, 6, "b")
			for _, path := range []string{"Claim", "Write"} {
				var err error
				if path == "Claim" {
					err = h.V.Claim(ctx, res, tok)
				} else {
					err = h.Write(ctx, res, tok)
				}
				require.ErrorIs(t, err, fence.ErrMalformed, "%s, %s", path, name)
				assert.NotErrorIs(t, err, verifier.ErrForeign, "%s, %s", path, name)
				assert.NotErrorIs(t, err, verifier.ErrStale, "%s, %s", path, name)
			}
		}
		requireHighest(t, h, res, 5, "a")
		assert.Equal(t, 1, logLen(t, h, res), "no malformed write landed")
	})
	// The case that made binding necessary: a token of a busy lock (Seq 42)
	// claims a resource first; the resource's rightful lock starts at 1.
	// Compared by Seq, the rightful lock would be stale forever.
	t.Run("BusyLockFirst", func(t *testing.T) {
		res := Resource(t, "accounts")
		busy := TokOf("orders/17", 42, "a")
		require.NoError(t, h.V.Claim(ctx, res, busy), "a fresh resource is bound by its first token")
		RequireForeign(t, h.V.Claim(ctx, res, TokOf("accounts/7", 1, "b")), res, TokOf("accounts/7", 1, "b"), "orders/17")
	})
}

// ClaimBeforeRead checks that Claim alone raises the high-water: once a
// newer holder has claimed the resource (before its read), an older holder
// that read earlier cannot land its write.
func ClaimBeforeRead(t *testing.T, h Harness) {
	ctx := t.Context()
	res := Resource(t, "r")
	require.NoError(t, h.V.Claim(ctx, res, Tok(5, "a")), "A claims, then reads")
	require.NoError(t, h.V.Claim(ctx, res, Tok(6, "b")), "B claims, then reads")
	requireHighest(t, h, res, 6, "b")
	RequireStale(t, h.Write(ctx, res, Tok(5, "a")), Tok(5, "a"), 6, "b")
	assert.Zero(t, logLen(t, h, res), "A's write, based on its earlier read, did not land")
	require.NoError(t, h.Write(ctx, res, Tok(6, "b")), "B writes with the token it claimed with")
	assert.Equal(t, 1, logLen(t, h, res))
}

// Move checks [verifier.Mover]: a resource moves only from the lock it is
// bound to (or from none), its high-water is forgotten, and the old lock's
// tokens are foreign from then on. A verifier that does not implement
// Mover fails this test: moving must be possible and explicit.
func Move(t *testing.T, h Harness) {
	ctx := t.Context()
	m, ok := h.V.(verifier.Mover)
	require.True(t, ok, "%T does not implement verifier.Mover", h.V)

	res := Resource(t, "r")
	require.NoError(t, h.Write(ctx, res, Tok(500, "a")))

	err := m.Move(ctx, res, "wrong", "next")
	RequireForeign(t, err, res, fence.Token{Key: "wrong"}, Lock)
	requireHighest(t, h, res, 500, "a")
	require.NoError(t, h.Write(ctx, res, Tok(501, "a")), "a refused Move changes nothing")

	require.NoError(t, m.Move(ctx, res, Lock, "next"))
	requireHighest(t, h, res, 0, "")
	RequireForeign(t, h.Write(ctx, res, Tok(502, "a")), res, Tok(502, "a"), "next")
	require.NoError(t, h.Write(ctx, res, TokOf("next", 1, "c")), "the new lock starts from its own counter")
	requireHighest(t, h, res, 1, "c")
	RequireStale(t, h.V.Claim(ctx, res, TokOf("next", 1, "d")), TokOf("next", 1, "d"), 1, "c")
	assert.Equal(t, 3, logLen(t, h, res), "500 and 501 of the old lock, 1 of the new")

	fresh := Resource(t, "fresh")
	require.NoError(t, m.Move(ctx, fresh, "any", "next"), "a resource bound to no lock may be moved")
	RequireForeign(t, h.V.Claim(ctx, fresh, Tok(9, "a")), fresh, Tok(9, "a"), "next")
	require.NoError(t, h.V.Claim(ctx, fresh, TokOf("next", 1, "a")))

	for name, args := range map[string][3]string{
		"same lock":             {res, "next", "next"},
		"empty from":            {res, "", "next"},
		"brace in to":           {res, "next", "{x}"},
		"NUL in to":             {res, "next", "other\x00"},
		"invalid UTF-8 in from": {res, "next\xff", "other"},
		"NUL in resource":       {res + "\x00", "next", "other"},
		"empty resource":        {"", "next", "other"},
	} {
		err := m.Move(ctx, args[0], args[1], args[2])
		assert.True(t, errors.Is(err, verifier.ErrInvalid) || errors.Is(err, verifier.ErrInvalidResource),
			"%s: %v", name, err)
	}
	requireHighest(t, h, res, 1, "c")
}
