package pgverifier_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// TestHooksReportEachCheckOnce: Claim, Guard, WithTx and Exec each report
// one verdict (WithTx and Exec guard internally without a second event).
func TestHooksReportEachCheckOnce(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	var got []observe.Verdict
	h := &observe.Hooks{Verified: func(_ context.Context, e observe.Verified) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, "postgres", e.Verifier)
		got = append(got, e.Verdict)
	}}
	v, err := pgverifier.New(connect(t, dsn), pgverifier.WithHooks(h))
	require.NoError(t, err)
	_, err = pgverifier.New(connect(t, dsn), pgverifier.WithHooks(nil))
	require.ErrorIs(t, err, pgverifier.ErrInvalid)

	r := "hooks/" + uuid.NewString()
	tok := func(seq uint64, holder string) fence.Token { return fence.Token{Key: "k", Seq: seq, Holder: holder} }
	require.NoError(t, v.Claim(ctx, r, tok(3, "a")))
	require.NoError(t, v.WithTx(ctx, r, tok(4, "a"), func(pgx.Tx) error { return nil }))
	_, err = v.Exec(ctx, r, tok(2, "b"), `SELECT 1`)
	require.ErrorIs(t, err, verifier.ErrStale)
	require.ErrorIs(t, v.Claim(ctx, r, tok(4, "b")), verifier.ErrStale)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []observe.Verdict{observe.Accepted, observe.Accepted, observe.Stale, observe.Conflict}, got)
}
