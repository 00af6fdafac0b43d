package sqlverifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// guardHarness fences writes with WithTx: guard first, then an INSERT into
// a log table, in one transaction.
func guardHarness(tg target, v *sqlverifier.Verifier, db *sql.DB, logTable string) verifiertest.Harness {
	insert := tg.q(`INSERT INTO ` + logTable + ` (resource, seq, holder) VALUES (?, ?, ?)`)
	return verifiertest.Harness{
		V:       v,
		Highest: v.Highest,
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			return v.WithTx(ctx, resource, tok, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, insert, resource, int64(tok.Seq), tok.Holder)
				return err
			})
		},
		Log: func(ctx context.Context, resource string) ([]fence.Token, error) {
			return tg.readLog(ctx, db, logTable, resource)
		},
		FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
			return v.WithTx(ctx, resource, tok, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, insert, resource, int64(tok.Seq), tok.Holder); err != nil {
					return err
				}
				return errors.New("the write failed after its insert")
			})
		},
	}
}

// execHarness fences writes with Exec: the guard, then an INSERT into a log
// table, in one transaction.
func execHarness(tg target, v *sqlverifier.Verifier, db *sql.DB, logTable string) verifiertest.Harness {
	h := guardHarness(tg, v, db, logTable)
	insert := tg.q(`INSERT INTO ` + logTable + ` (resource, seq, holder) VALUES (?, ?, ?)`)
	h.Write = func(ctx context.Context, resource string, tok fence.Token) error {
		res, err := v.Exec(ctx, resource, tok, insert, resource, int64(tok.Seq), tok.Holder)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("Exec affected %d rows (%v)", n, err)
		}
		return nil
	}
	h.FailWrite = func(ctx context.Context, resource string, tok fence.Token) error {
		// The holder column is NOT NULL.
		_, err := v.Exec(ctx, resource, tok, insert, resource, int64(tok.Seq), nil)
		return err
	}
	return h
}

// TestVerifier runs the conformance kit on every target, through WithTx and
// through Exec, on a pool of connections.
func TestVerifier(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		db := tg.open(t)
		v := tg.verifier(t, db)
		t.Run("WithTx", func(t *testing.T) {
			verifiertest.Run(t, guardHarness(tg, v, db, tg.createLog(t, db, "verifier_log")))
		})
		t.Run("Exec", func(t *testing.T) {
			verifiertest.Run(t, execHarness(tg, v, db, tg.createLog(t, db, "exec_log")))
		})
	})
}

func TestVerifierCustomTable(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		schema := "odd schema " + strings.ReplaceAll(tg.name, "-", "_")
		name := "fence\"`; DROP TABLE fence_tokens; --"
		table := tg.ident(schema) + "." + tg.ident(name)
		createSchema, like := `CREATE SCHEMA `+tg.ident(schema), `CREATE TABLE `+table+` LIKE fence_tokens`
		if tg.d == sqlverifier.Postgres {
			like = `CREATE TABLE ` + table + ` (LIKE fence_tokens INCLUDING ALL)`
		}
		_, err := db.ExecContext(ctx, `DROP SCHEMA IF EXISTS `+tg.ident(schema)+map[bool]string{true: " CASCADE"}[tg.d == sqlverifier.Postgres])
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, createSchema)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, like)
		require.NoError(t, err)

		v := tg.verifier(t, db, sqlverifier.WithTable(schema, name))
		assert.Equal(t, table, v.Table())
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(3, "a")))
		verifiertest.RequireStale(t, v.Claim(ctx, res, verifiertest.Tok(2, "a")), verifiertest.Tok(2, "a"), 3, "a")
		require.NoError(t, v.Move(ctx, res, verifiertest.Tok(1, "a").Key, "other"))

		var n int
		require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		assert.Equal(t, 1, n, "the claim went to the custom table")
		requireHighest(t, tg.verifier(t, db), res, 0, "")
		_, _, _, found := tg.row(t, db, res)
		assert.False(t, found, "and not to fence_tokens, which still exists")

		long := strings.Repeat("t", 64)
		if tg.d == sqlverifier.MySQL {
			long = strings.Repeat("é", 65)
		}
		for _, parts := range [][]string{nil, {""}, {"a", "b", "c"}, {"a\x00b"}, {"\xff"}, {long}} {
			_, err := sqlverifier.New(db, tg.d, sqlverifier.WithTable(parts...))
			assert.ErrorIs(t, err, sqlverifier.ErrInvalid, "table %q", parts)
		}
	})
}

func TestVerifierMissingTable(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		v := tg.verifier(t, tg.open(t), sqlverifier.WithTable("no_such_table"))
		err := v.Claim(t.Context(), "r", verifiertest.Tok(1, "a"))
		require.Error(t, err)
		assert.NotErrorIs(t, err, verifier.ErrStale)
		assert.ErrorContains(t, err, "no_such_table")
		assert.ErrorContains(t, err, "sqlverifier: guard")
	})
}

// TestUserSQLError: a failing statement of the caller's in Exec or WithTx is
// reported as the caller's error, with the driver's error in the chain, and
// not as a guard error; the high-water stays where it was.
func TestUserSQLError(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		v := tg.verifier(t, tg.open(t))
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(5, "a")))

		isDriverErr := func(err error) bool {
			var my *mysql.MySQLError
			var pg *pgconn.PgError
			return errors.As(err, &my) || errors.As(err, &pg)
		}
		_, err := v.Exec(ctx, res, verifiertest.Tok(6, "b"), `UPDATE WHERE syntax error`)
		require.Error(t, err)
		assert.True(t, isDriverErr(err), "the driver's error is in the chain: %v", err)
		assert.True(t, strings.HasPrefix(err.Error(), "sqlverifier: exec: "), err.Error())
		assert.NotContains(t, err.Error(), "guard")
		assert.NotErrorIs(t, err, verifier.ErrStale)
		assert.NotErrorIs(t, err, verifier.ErrForeign)
		requireHighest(t, v, res, 5, "a")

		var fnErr error
		err = v.WithTx(ctx, res, verifiertest.Tok(6, "b"), func(tx *sql.Tx) error {
			_, fnErr = tx.ExecContext(ctx, `SELECT * FROM no_such_table_either`)
			return fnErr
		})
		require.Error(t, fnErr)
		assert.Equal(t, fnErr, err, "WithTx returns fn's error as it is")
		assert.True(t, isDriverErr(err))
		requireHighest(t, v, res, 5, "a")
	})
}

// TestGuardRollback shows that a guard in the caller's own transaction
// raises the high-water only if that transaction commits, and that the
// caller's transaction sees it meanwhile.
func TestGuardRollback(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(5, "a")))

		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(9, "b")))
		seq, holder, _, _ := tg.row(t, tx, res)
		assert.Equal(t, uint64(9), seq, "inside the transaction the claim is visible")
		assert.Equal(t, "b", holder)
		verifiertest.RequireStale(t, v.Guard(ctx, tx, res, verifiertest.Tok(8, "c")), verifiertest.Tok(8, "c"), 9, "b")
		require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(9, "b")), "a refusal leaves the transaction usable")
		require.NoError(t, tx.Rollback())
		requireHighest(t, v, res, 5, "a")

		// A verifier on a *sql.Conn: WithTx runs on that connection.
		c := tg.conn(t)
		cv := tg.verifier(t, c)
		require.NoError(t, cv.WithTx(ctx, res, verifiertest.Tok(7, "c"), func(*sql.Tx) error { return nil }))
		requireHighest(t, v, res, 7, "c")
	})
}

// TestGuardSnapshot: on MySQL's REPEATABLE READ, a transaction that read
// the high-water row before its guard still gets the right verdict (the
// guard's own read is a locking one, not the transaction's old snapshot).
func TestGuardSnapshot(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		v := tg.verifier(t, db)
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(5, "a")))

		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		require.NoError(t, err)
		defer tx.Rollback()
		seq, _, _, _ := tg.row(t, tx, res) // takes the snapshot
		require.Equal(t, uint64(5), seq)
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(6, "b")), "another holder moves on")

		err = v.Guard(ctx, tx, res, verifiertest.Tok(5, "a"))
		if tg.d == sqlverifier.Postgres {
			// PostgreSQL refuses to update a row changed after the snapshot.
			var pg *pgconn.PgError
			require.ErrorAs(t, err, &pg)
			assert.Equal(t, "40001", pg.Code, "serialization failure")
			return
		}
		verifiertest.RequireStale(t, err, verifiertest.Tok(5, "a"), 6, "b")
	})
}

// TestMySQLSimultaneousAssignment: MariaDB's SIMULTANEOUS_ASSIGNMENT mode,
// in which every assignment of the guard sees the old row, gives the same
// verdicts as the default left-to-right order.
func TestMySQLSimultaneousAssignment(t *testing.T) {
	tg := targets()[0]
	ctx := t.Context()
	c := tg.conn(t)
	_, err := c.ExecContext(ctx, `SET SESSION sql_mode = CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')`)
	require.NoError(t, err)
	v := tg.verifier(t, c)
	res := verifiertest.Resource(t, "r")
	require.NoError(t, v.Claim(ctx, res, tok("k", 5, "a")))
	require.NoError(t, v.Claim(ctx, res, tok("k", 6, "b")))
	require.NoError(t, v.Claim(ctx, res, tok("k", 6, "b")))
	verifiertest.RequireStale(t, v.Claim(ctx, res, tok("k", 6, "c")), tok("k", 6, "c"), 6, "b")
	verifiertest.RequireStale(t, v.Claim(ctx, res, tok("k", 5, "b")), tok("k", 5, "b"), 6, "b")
	require.ErrorIs(t, v.Claim(ctx, res, tok("other", 9, "b")), verifier.ErrForeign)
	seq, holder, lock, _ := tg.row(t, c, res)
	assert.Equal(t, []any{uint64(6), "b", "k"}, []any{seq, holder, lock})
}

// TestWithTxPanic checks that a panicking fn rolls back and the panic goes on.
func TestWithTxPanic(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		c := tg.conn(t)
		v := tg.verifier(t, c)
		res := verifiertest.Resource(t, "r")
		assert.PanicsWithValue(t, "boom", func() {
			_ = v.WithTx(t.Context(), res, verifiertest.Tok(3, "a"), func(*sql.Tx) error { panic("boom") })
		})
		requireHighest(t, v, res, 0, "")
		require.NoError(t, v.Claim(t.Context(), res, verifiertest.Tok(2, "a")), "the connection is usable again")
	})
}

// TestWithTxRejectedSkipsFn checks that fn never runs for a refused token.
func TestWithTxRejectedSkipsFn(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		v := tg.verifier(t, tg.open(t))
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(t.Context(), res, verifiertest.Tok(3, "a")))
		called := false
		fn := func(*sql.Tx) error { called = true; return nil }
		verifiertest.RequireStale(t, v.WithTx(t.Context(), res, verifiertest.Tok(2, "b"), fn), verifiertest.Tok(2, "b"), 3, "a")
		require.ErrorIs(t, v.WithTx(t.Context(), res, tok("other", 9, "b"), fn), verifier.ErrForeign)
		assert.False(t, called)
	})
}

// TestContextEnds: a call whose context has ended returns at once with the
// context's error in the chain, and claims nothing.
func TestContextEnds(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		v := tg.verifier(t, tg.open(t))
		res := verifiertest.Resource(t, "r")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		assert.ErrorIs(t, v.Claim(ctx, res, verifiertest.Tok(3, "a")), context.Canceled)
		_, err := v.Exec(ctx, res, verifiertest.Tok(3, "a"), "SELECT 1")
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, v.WithTx(ctx, res, verifiertest.Tok(3, "a"), func(*sql.Tx) error { return nil }), context.Canceled)
		assert.ErrorIs(t, v.Move(ctx, res, "a", "b"), context.Canceled)
		requireHighest(t, v, res, 0, "")
	})
}

// On MySQL, an accepted guard of a resource whose row exists is one UPDATE:
// no INSERT ... ON DUPLICATE KEY UPDATE and no read of the row.
func TestMySQLGuardFastPath(t *testing.T) {
	for _, tg := range targets() {
		if tg.d != sqlverifier.MySQL {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			ctx := t.Context()
			c := tg.conn(t)
			v := tg.verifier(t, c)
			res := verifiertest.Resource(t, "r")
			require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(5, "a")))

			tx, err := c.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer tx.Rollback()
			status := func() (inserts, updates, selects int64) {
				rows, err := tx.QueryContext(ctx, `SHOW SESSION STATUS WHERE Variable_name IN ('Com_insert', 'Com_update', 'Com_select')`)
				require.NoError(t, err)
				defer rows.Close()
				for rows.Next() {
					var name string
					var n int64
					require.NoError(t, rows.Scan(&name, &n))
					switch name {
					case "Com_insert":
						inserts = n
					case "Com_update":
						updates = n
					case "Com_select":
						selects = n
					}
				}
				require.NoError(t, rows.Err())
				return
			}
			i0, u0, s0 := status()
			require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(6, "b")))
			i1, u1, s1 := status()
			assert.Equal(t, int64(0), i1-i0, "no INSERT")
			assert.Equal(t, int64(1), u1-u0, "one UPDATE")
			assert.Equal(t, int64(0), s1-s0, "no SELECT")

			verifiertest.RequireStale(t, v.Guard(ctx, tx, res, verifiertest.Tok(4, "c")), verifiertest.Tok(4, "c"), 6, "b")
			require.NoError(t, tx.Commit())
			requireHighest(t, v, res, 6, "b")
		})
	}
}
