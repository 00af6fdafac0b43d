package verifiertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
)

// ClockBound checks a verifier made with a clock bound of bound (its
// WithClockBound option, or Memory.ClockBound): a token from the clock is
// accepted, a forged one (Seq 2^53-2, or an hour past the bound) is
// refused with an error wrapping verifier.ErrAhead, and leaves the
// high-water where it was, so the next real token is accepted. highest
// reads a resource's high-water Seq.
func ClockBound(t *testing.T, v verifier.Verifier, bound time.Duration, highest func(ctx context.Context, resource string) uint64) {
	t.Helper()
	ctx := t.Context()
	res := Resource(t, "clockbound")
	micros := func(at time.Time) uint64 { return uint64(at.UnixMicro()) }
	now := TokOf("jobs", micros(time.Now()), "a")
	require.NoError(t, v.Claim(ctx, res, now), "a token from the clock")
	for _, seq := range []uint64{fence.MaxSeq - 1, micros(time.Now().Add(bound + time.Hour))} {
		forged := TokOf("jobs", seq, "evil")
		err := v.Claim(ctx, res, forged)
		require.ErrorIs(t, err, verifier.ErrAhead, "Seq %d", seq)
		assert.NotErrorIs(t, err, verifier.ErrStale)
		assert.Equal(t, now.Seq, highest(ctx, res), "a refused token changes nothing")
	}
	next := TokOf("jobs", micros(time.Now())+1, "b")
	require.NoError(t, v.Claim(ctx, res, next), "the next real token")
	within := TokOf("jobs", micros(time.Now().Add(bound-time.Hour)), "c")
	require.NoError(t, v.Claim(ctx, res, within), "a token within the bound")
}
