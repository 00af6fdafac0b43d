package sqlverifier_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// TestHooksReportEachCheckOnce: Claim, Guard, WithTx and Exec each report
// one verdict (WithTx, Exec and the MySQL Claim guard internally without a
// second event), with the verifier's name: "mysql", or "postgres" as
// pgverifier.
func TestHooksReportEachCheckOnce(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		want := map[sqlverifier.Dialect]string{sqlverifier.MySQL: "mysql", sqlverifier.Postgres: "postgres"}[tg.d]
		var mu sync.Mutex
		var got []observe.Verdict
		h := &observe.Hooks{Verified: func(_ context.Context, e observe.Verified) {
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, want, e.Verifier)
			got = append(got, e.Verdict)
		}}
		db := tg.open(t)
		v := tg.verifier(t, db, sqlverifier.WithHooks(h))

		r := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, r, tok("k", 3, "a")))
		require.NoError(t, v.WithTx(ctx, r, tok("k", 4, "a"), func(*sql.Tx) error { return nil }))
		_, err := v.Exec(ctx, r, tok("k", 2, "b"), `SELECT 1`)
		require.ErrorIs(t, err, verifier.ErrStale)
		require.ErrorIs(t, v.Claim(ctx, r, tok("k", 4, "b")), verifier.ErrStale)
		require.ErrorIs(t, v.Claim(ctx, r, tok("other", 9, "b")), verifier.ErrForeign)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, v.Guard(ctx, tx, r, tok("k", 5, "c")))
		require.NoError(t, tx.Rollback())
		_, err = v.Exec(ctx, r, tok("k", 6, "c"), `NOT SQL`)
		require.Error(t, err)
		require.NoError(t, v.Move(ctx, r, "k", "k2"), "Move is not a token check and reports nothing")

		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []observe.Verdict{observe.Accepted, observe.Accepted, observe.Stale, observe.Conflict,
			observe.Foreign, observe.Accepted, observe.Error}, got)
	})
}
