package sqlverifier_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// multiAccounts creates two accounts of 100 in the target's table and
// returns the table and the ids.
func multiAccounts(t *testing.T, tg target, db *sql.DB) (table, a, b string) {
	t.Helper()
	table = tg.ident("multi_accounts")
	ddl := `CREATE TABLE IF NOT EXISTS ` + table + ` (id VARCHAR(64) PRIMARY KEY, balance INT NOT NULL)`
	_, err := db.ExecContext(t.Context(), ddl)
	require.NoError(t, err)
	a, b = "acct/"+uuid.NewString(), "acct/"+uuid.NewString()
	_, err = db.ExecContext(t.Context(), tg.q(`INSERT INTO `+table+` (id, balance) VALUES (?, 100), (?, 100)`), a, b)
	require.NoError(t, err)
	return table, a, b
}

func TestWithTxAllTransfer(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		table, a, b := multiAccounts(t, tg, db)
		move := func(from, to string, amount int) func(*sql.Tx) error {
			return func(tx *sql.Tx) error {
				q := tg.q(`UPDATE ` + table + ` SET balance = balance + ? WHERE id = ?`)
				if _, err := tx.ExecContext(ctx, q, -amount, from); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, q, amount, to)
				return err
			}
		}
		bal := func() [2]int {
			var out [2]int
			for i, id := range []string{a, b} {
				require.NoError(t, db.QueryRowContext(ctx, tg.q(`SELECT balance FROM `+table+` WHERE id = ?`), id).Scan(&out[i]))
			}
			return out
		}
		toks := func(sa, sb uint64) map[string]fence.Token {
			return map[string]fence.Token{a: tok(a, sa, "h"), b: tok(b, sb, "h")}
		}

		require.NoError(t, v.WithTxAll(ctx, toks(5, 7), move(a, b, 10)))
		assert.Equal(t, [2]int{90, 110}, bal())
		requireHighest(t, v, a, 5, "h")
		requireHighest(t, v, b, 7, "h")

		// b's token is stale: nothing is written, a's high-water stays.
		called := false
		err := v.WithTxAll(ctx, toks(6, 6), func(*sql.Tx) error { called = true; return nil })
		var stale *verifier.StaleError
		require.ErrorAs(t, err, &stale)
		assert.Equal(t, b, stale.Resource)
		assert.False(t, called)
		requireHighest(t, v, a, 5, "h")

		boom := errors.New("boom")
		err = v.WithTxAll(ctx, toks(8, 8), func(tx *sql.Tx) error { _ = move(a, b, 50)(tx); return boom })
		require.ErrorIs(t, err, boom)
		assert.Equal(t, [2]int{90, 110}, bal())
		requireHighest(t, v, b, 7, "h")

		err = v.WithTxAll(ctx, map[string]fence.Token{a: tok("other", 9, "h")}, move(a, b, 1))
		require.ErrorIs(t, err, verifier.ErrForeign)

		// GuardAll in the caller's transaction.
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, v.GuardAll(ctx, tx, toks(8, 8)))
		require.NoError(t, move(b, a, 10)(tx))
		require.NoError(t, tx.Commit())
		assert.Equal(t, [2]int{100, 100}, bal())
		requireHighest(t, v, a, 8, "h")

		assert.ErrorIs(t, v.WithTxAll(ctx, nil, move(a, b, 1)), sqlverifier.ErrInvalid)
		assert.ErrorIs(t, v.WithTxAll(ctx, toks(20, 20), nil), sqlverifier.ErrInvalid)
		assert.ErrorIs(t, v.GuardAll(ctx, nil, toks(20, 20)), sqlverifier.ErrInvalid)
		requireHighest(t, v, a, 8, "h")
	})
}

// TestWithTxAllGuardsInNameOrder: with the row of the second name locked
// by another transaction, WithTxAll holds the first name's row while it
// waits (it guards in name order), whatever the map's order.
func TestWithTxAllGuardsInNameOrder(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		lockRow := tg.q(`SELECT seq FROM fence_tokens WHERE resource = ? FOR UPDATE`)
		for i := range 6 {
			p := "order/" + uuid.NewString()
			first, second := p+"/1", p+"/2"
			require.NoError(t, v.WithTxAll(ctx, map[string]fence.Token{first: tok("k", 1, "h"), second: tok("k", 1, "h")}, func(*sql.Tx) error { return nil }))

			hold, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			var seq int64
			require.NoError(t, hold.QueryRowContext(ctx, lockRow, second).Scan(&seq))
			done := make(chan error, 1)
			go func() {
				done <- v.WithTxAll(ctx, map[string]fence.Token{second: tok("k", 2, "h"), first: tok("k", 2, "h")}, func(*sql.Tx) error { return nil })
			}()
			// Once WithTxAll waits for the second row, it holds the first.
			require.Eventually(t, func() bool {
				ptx, err := db.BeginTx(ctx, nil)
				require.NoError(t, err)
				defer ptx.Rollback()
				return ptx.QueryRowContext(ctx, lockRow+" NOWAIT", first).Scan(&seq) != nil
			}, 5*time.Second, 10*time.Millisecond, "round %d: the first row is not held while the second is awaited", i)
			require.NoError(t, hold.Rollback())
			require.NoError(t, <-done)
		}
	})
}
