package verifiertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
)

// Reset checks the way back from a poisoned high-water: h.V must be a
// [verifier.Resetter]. A made-up token of Seq fence.MaxSeq locks the real
// holders out; Reset to a holder's token lets that holder (and newer
// tokens) in again and keeps older ones out, through Claim and Write; a
// Reset with no holder refuses every token of its Seq; a Reset to another
// lock rebinds the resource; a Reset of a resource never written works; and
// bad arguments change nothing.
func Reset(t *testing.T, h Harness) {
	r, ok := h.V.(verifier.Resetter)
	require.True(t, ok, "the verifier (%T) has no Reset method (verifier.Resetter): an operator could not undo a poisoned high-water", h.V)
	ctx := t.Context()

	res := Resource(t, "poisoned")
	require.NoError(t, h.V.Claim(ctx, res, Tok(5, "a")))
	require.NoError(t, h.Write(ctx, res, Tok(5, "a")))
	require.NoError(t, h.V.Claim(ctx, res, Tok(fence.MaxSeq, "mallory")), "a made-up token is accepted: a verifier trusts its callers")
	RequireStale(t, h.V.Claim(ctx, res, Tok(6, "b")), Tok(6, "b"), fence.MaxSeq, "mallory")

	require.NoError(t, r.Reset(ctx, res, Tok(6, "b")))
	requireHighest(t, h, res, 6, "b")
	require.NoError(t, h.Write(ctx, res, Tok(6, "b")), "the holder the reset names writes again")
	RequireStale(t, h.V.Claim(ctx, res, Tok(6, "c")), Tok(6, "c"), 6, "b")
	RequireStale(t, h.Write(ctx, res, Tok(5, "a")), Tok(5, "a"), 6, "b")
	require.NoError(t, h.Write(ctx, res, Tok(7, "c")), "a newer token is accepted")
	requireHighest(t, h, res, 7, "c")
	assert.Equal(t, 3, logLen(t, h, res), "writes of 5/a, 6/b and 7/c")

	// No holder: the lock was free, its counter at 9.
	require.NoError(t, r.Reset(ctx, res, Tok(9, "")))
	requireHighest(t, h, res, 9, "")
	RequireStale(t, h.V.Claim(ctx, res, Tok(9, "c")), Tok(9, "c"), 9, "")
	RequireStale(t, h.V.Claim(ctx, res, Tok(8, "c")), Tok(8, "c"), 9, "")
	require.NoError(t, h.V.Claim(ctx, res, Tok(10, "d")))

	// Another lock: the resource follows the reset's lock.
	const other = "verifiertest-reset"
	require.NoError(t, r.Reset(ctx, res, TokOf(other, 3, "o")))
	requireHighest(t, h, res, 3, "o")
	RequireForeign(t, h.V.Claim(ctx, res, Tok(11, "d")), res, Tok(11, "d"), other)
	require.NoError(t, h.V.Claim(ctx, res, TokOf(other, 4, "p")))

	// A resource with no high-water yet.
	fresh := Resource(t, "fresh")
	require.NoError(t, r.Reset(ctx, fresh, Tok(2, "x")))
	requireHighest(t, h, fresh, 2, "x")
	RequireStale(t, h.V.Claim(ctx, fresh, Tok(1, "y")), Tok(1, "y"), 2, "x")

	// Bad arguments: refused before any change.
	bad := []struct {
		name     string
		resource string
		to       fence.Token
		want     error
	}{
		{"empty resource", "", Tok(1, "x"), verifier.ErrInvalidResource},
		{"seq 0", res, Tok(0, "x"), verifier.ErrInvalid},
		{"seq past MaxSeq", res, Tok(fence.MaxSeq+1, "x"), verifier.ErrInvalid},
		{"no lock", res, TokOf("", 1, "x"), verifier.ErrInvalid},
		{"bad holder", res, Tok(1, "a b"), verifier.ErrInvalid},
	}
	for _, b := range bad {
		assert.ErrorIs(t, r.Reset(ctx, b.resource, b.to), b.want, b.name)
	}
	assert.ErrorIs(t, resetNilContext(r, res, Tok(1, "x")), verifier.ErrInvalid, "nil context")
	requireHighest(t, h, res, 4, "p")
}

// resetNilContext calls r.Reset with a nil context and turns a panic into
// an error, as claimNilContext does.
func resetNilContext(r verifier.Resetter, resource string, to fence.Token) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Reset(nil, ...) panicked: %v", p)
		}
	}()
	var nilCtx context.Context
	return r.Reset(nilCtx, resource, to)
}
