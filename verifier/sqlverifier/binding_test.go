package sqlverifier_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// requireForeign asserts that err is a *ForeignError for tok with the given
// bound lock, and not a stale-token error.
func requireForeign(t testing.TB, err error, res string, tk fence.Token, lock string) {
	t.Helper()
	require.ErrorIs(t, err, verifier.ErrForeign)
	assert.NotErrorIs(t, err, verifier.ErrStale)
	var fe *verifier.ForeignError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, verifier.ForeignError{Resource: res, Token: tk, Lock: lock}, *fe)
}

// TestBinding: a resource belongs to the lock of the first token it
// accepted; a token of another lock is refused as foreign, through every
// path, before the seq rule, and changes nothing.
func TestBinding(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, tok("jobs", 5, "a")))

		for name, seq := range map[string]uint64{"higher": 99, "same": 5, "lower": 1} {
			foreign := tok("other", seq, "z")
			requireForeign(t, v.Claim(ctx, res, foreign), res, foreign, "jobs")
			requireForeign(t, v.WithTx(ctx, res, foreign, func(*sql.Tx) error {
				t.Errorf("%s: fn called for a foreign token", name)
				return nil
			}), res, foreign, "jobs")
			_, err := v.Exec(ctx, res, foreign, "SELECT 1")
			requireForeign(t, err, res, foreign, "jobs")
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			requireForeign(t, v.Guard(ctx, tx, res, foreign), res, foreign, "jobs")
			require.NoError(t, tx.Rollback())
		}
		seq, holder, lock, _ := tg.row(t, db, res)
		assert.Equal(t, []any{uint64(5), "a", "jobs"}, []any{seq, holder, lock}, "nothing changed")
		require.NoError(t, v.Claim(ctx, res, tok("jobs", 6, "b")), "the bound lock goes on")
	})
}

// TestLegacyRowAdopts: a row written before the lock binding (lock_key
// NULL) takes the lock of the next token it accepts; the seq rule still
// applies, and a refused token binds nothing.
func TestLegacyRowAdopts(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		now := "UTC_TIMESTAMP(6)"
		if tg.d == sqlverifier.Postgres {
			now = "now()"
		}
		legacy := func(res string) {
			_, err := db.ExecContext(ctx, tg.q(`INSERT INTO fence_tokens (resource, seq, holder, lock_key, updated_at) VALUES (?, 5, 'a', NULL, `+now+`)`), res)
			require.NoError(t, err)
		}

		res := verifiertest.Resource(t, "r")
		legacy(res)
		verifiertest.RequireStale(t, v.Claim(ctx, res, tok("jobs", 4, "b")), tok("jobs", 4, "b"), 5, "a")
		verifiertest.RequireStale(t, v.Claim(ctx, res, tok("jobs", 5, "b")), tok("jobs", 5, "b"), 5, "a")
		_, _, lock, _ := tg.row(t, db, res)
		assert.Empty(t, lock, "a refused token binds nothing")
		require.NoError(t, v.Claim(ctx, res, tok("jobs", 6, "b")))
		seq, holder, lock, _ := tg.row(t, db, res)
		assert.Equal(t, []any{uint64(6), "b", "jobs"}, []any{seq, holder, lock}, "adopted")
		requireForeign(t, v.Claim(ctx, res, tok("other", 7, "c")), res, tok("other", 7, "c"), "jobs")

		// The same seq and holder as the legacy high-water is accepted, and
		// binds, through each path.
		for _, path := range []string{"Exec", "WithTx"} {
			res := verifiertest.Resource(t, path)
			legacy(res)
			var err error
			if path == "Exec" {
				_, err = v.Exec(ctx, res, tok("jobs", 5, "a"), "SELECT 1")
			} else {
				err = v.WithTx(ctx, res, tok("jobs", 5, "a"), func(*sql.Tx) error { return nil })
			}
			require.NoError(t, err, path)
			_, _, lock, _ := tg.row(t, db, res)
			assert.Equal(t, "jobs", lock, path)
		}
	})
}

// TestMove: Move from the bound lock (or from none) rebinds and resets the
// high-water; Move from another lock is refused and changes nothing.
func TestMove(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		var _ verifier.Mover = v

		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, tok("old", 50, "a")))

		err := v.Move(ctx, res, "wrong", "new")
		requireForeign(t, err, res, fence.Token{Key: "wrong"}, "old")
		seq, holder, lock, _ := tg.row(t, db, res)
		assert.Equal(t, []any{uint64(50), "a", "old"}, []any{seq, holder, lock}, "a refused Move changes nothing")

		require.NoError(t, v.Move(ctx, res, "old", "new"))
		seq, holder, lock, _ = tg.row(t, db, res)
		assert.Equal(t, []any{uint64(0), "", "new"}, []any{seq, holder, lock}, "bound to new, high-water forgotten")
		requireHighest(t, v, res, 0, "")
		requireForeign(t, v.Claim(ctx, res, tok("old", 51, "a")), res, tok("old", 51, "a"), "new")
		require.NoError(t, v.Claim(ctx, res, tok("new", 1, "b")), "the new lock's first token, however small")
		requireHighest(t, v, res, 1, "b")
		requireForeign(t, v.Move(ctx, res, "old", "new"), res, fence.Token{Key: "old"}, "new")

		// A resource never seen is bound to no lock: Move binds it.
		fresh := verifiertest.Resource(t, "fresh")
		require.NoError(t, v.Move(ctx, fresh, "any", "new"))
		_, _, lock, found := tg.row(t, db, fresh)
		require.True(t, found)
		assert.Equal(t, "new", lock)
		requireForeign(t, v.Claim(ctx, fresh, tok("any", 3, "a")), fresh, tok("any", 3, "a"), "new")

		// Invalid arguments: before any I/O.
		for name, args := range map[string][3]string{
			"same lock":   {res, "a", "a"},
			"empty from":  {res, "", "a"},
			"brace in to": {res, "a", "{b}"},
		} {
			err := v.Move(ctx, args[0], args[1], args[2])
			assert.ErrorIs(t, err, sqlverifier.ErrInvalid, name)
			assert.ErrorIs(t, err, verifier.ErrInvalid, name)
		}
		assert.ErrorIs(t, v.Move(ctx, "", "a", "b"), verifier.ErrInvalidResource)
	})
}

// Guard in the caller's transaction uses no other connection: on a pool
// of one connection, a guard of a resource never seen before does not
// wait for a second one.
func TestGuardOnOneConnection(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		db := tg.open(t)
		db.SetMaxOpenConns(1)
		v := tg.verifier(t, db)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		res := verifiertest.Resource(t, "new")
		require.NoError(t, v.Guard(ctx, tx, res, tok("l", 1, "a")))
		require.NoError(t, tx.Commit())
		requireHighest(t, v, res, 1, "a")
	})
}

// A row deleted behind the verifier's back (a cleanup, a table made
// again) is made again: Move and the guards go on.
func TestRowDeletedBehindTheVerifier(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		res := verifiertest.Resource(t, "gone")
		require.NoError(t, v.Claim(ctx, res, tok("l", 5, "a")))
		_, err := db.ExecContext(ctx, tg.q(`DELETE FROM fence_tokens WHERE resource = ?`), res)
		require.NoError(t, err)
		require.NoError(t, v.Move(ctx, res, "l", "m"), "a resource with no row is bound to no lock")
		require.NoError(t, v.Claim(ctx, res, tok("m", 1, "b")))
		_, err = db.ExecContext(ctx, tg.q(`DELETE FROM fence_tokens WHERE resource = ?`), res)
		require.NoError(t, err)
		require.NoError(t, v.Claim(ctx, res, tok("n", 1, "c")), "the row is made again")
		require.NoError(t, v.Claim(ctx, res, tok("n", 2, "c")))
		requireHighest(t, v, res, 2, "c")
	})
}

func TestClockBound(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		v := tg.verifier(t, tg.open(t), sqlverifier.WithClockBound(24*time.Hour))
		verifiertest.ClockBound(t, v, 24*time.Hour, func(ctx context.Context, res string) uint64 {
			seq, _, err := v.Highest(ctx, res)
			require.NoError(t, err)
			return seq
		})
	})
}
