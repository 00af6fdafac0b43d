package sqlverifier_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// openStmts returns how many statements the sessions of conns have
// prepared and not closed, by their own counters: read on each session, so
// after everything it sent before (a close needs no answer).
func openStmts(t *testing.T, conns ...*sql.Conn) int {
	t.Helper()
	n := 0
	for _, c := range conns {
		rows, err := c.QueryContext(t.Context(), `SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_close')`)
		require.NoError(t, err)
		for rows.Next() {
			var name string
			var v int
			require.NoError(t, rows.Scan(&name, &v))
			if name == "Com_stmt_prepare" {
				n += v
			} else {
				n -= v
			}
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
	}
	return n
}

// TestPreparedLifetime checks, on MariaDB, that the guard's statement is
// prepared at most once per connection however many calls run (WithTx,
// Exec, Claim, and Guard in the caller's transaction), and that Close
// releases it on every connection; the verifier then still works.
func TestPreparedLifetime(t *testing.T) {
	for _, tg := range targets() {
		if tg.d != sqlverifier.MySQL {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			ctx := t.Context()
			for _, on := range []string{"DB", "Conn"} {
				t.Run(on, func(t *testing.T) {
					pool := tg.open(t)
					pool.SetMaxOpenConns(2)
					var d sqlverifier.DB = pool
					var conn *sql.Conn
					if on == "Conn" {
						conn = tg.conn(t)
						d = conn
					}
					// sessions holds every session of d until release.
					sessions := func() (cs []*sql.Conn, release func()) {
						if conn != nil {
							return []*sql.Conn{conn}, func() {}
						}
						for range 2 { // all of the pool's
							c, err := pool.Conn(ctx)
							require.NoError(t, err)
							cs = append(cs, c)
						}
						return cs, func() {
							for _, c := range cs {
								c.Close()
							}
						}
					}
					v := tg.verifier(t, d)
					res := verifiertest.Resource(t, "r")
					for i := range uint64(30) {
						tok := verifiertest.Tok(4*i+1, "a")
						require.NoError(t, v.WithTx(ctx, res, tok, func(*sql.Tx) error { return nil }))
						_, err := v.Exec(ctx, res, verifiertest.Tok(4*i+2, "a"), `SELECT 1`)
						require.NoError(t, err)
						require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(4*i+3, "a")))
						tx, err := d.BeginTx(ctx, nil)
						require.NoError(t, err)
						require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(4*i+4, "a")))
						require.NoError(t, tx.Commit())
					}
					requireHighest(t, v, res, 120, "a")
					cs, release := sessions()
					open := openStmts(t, cs...)
					release()
					assert.Positive(t, open, "the guard is prepared")
					assert.LessOrEqual(t, open, len(cs), "at most once per connection")
					require.NoError(t, v.Close())
					cs, release = sessions()
					assert.Zero(t, openStmts(t, cs...), "Close closes it everywhere")
					release()
					require.NoError(t, v.Close(), "again")
					require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(200, "a")), "usable after Close")
					cs, release = sessions()
					assert.Zero(t, openStmts(t, cs...), "and keeps nothing prepared")
					release()
				})
			}
		})
	}
	require.NoError(t, (*sqlverifier.Verifier)(nil).Close())
}

// TestGuardOtherDB runs Guard, on a verifier whose statement is prepared,
// in a transaction of another pool of the same server: the statement
// cannot run there, so the guard runs unprepared, and still guards. (This
// also fails if database/sql changes the text of its error for a
// statement of another DB, which the verifier recognizes.)
func TestGuardOtherDB(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		v := tg.verifier(t, tg.open(t))
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(1, "a"))) // prepares
		other := tg.open(t)
		for _, seq := range []uint64{2, 3} {
			tx, err := other.BeginTx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(seq, "b")))
			verifiertest.RequireStale(t, v.Guard(ctx, tx, res, verifiertest.Tok(1, "a")), verifiertest.Tok(1, "a"), seq, "b")
			require.NoError(t, tx.Commit())
		}
		requireHighest(t, v, res, 3, "b")
		// The same on a verifier of a Conn, and a transaction of another
		// Conn of the same pool.
		pool := tg.open(t)
		c1, err := pool.Conn(ctx)
		require.NoError(t, err)
		defer c1.Close()
		c2, err := pool.Conn(ctx)
		require.NoError(t, err)
		defer c2.Close()
		vc := tg.verifier(t, c1)
		require.NoError(t, vc.Claim(ctx, res, verifiertest.Tok(4, "a")))
		tx, err := c2.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, vc.Guard(ctx, tx, res, verifiertest.Tok(5, "b")))
		require.NoError(t, tx.Rollback())
		requireHighest(t, vc, res, 4, "a") // rolled back with the caller's transaction
	})
}

// TestGuardOnOwnConn runs Guard, on MariaDB, on the verifier's own
// *sql.Conn inside a transaction begun in SQL: the guard's statement is
// prepared on that session and runs in its transaction, so a rollback
// takes the raised high-water back.
func TestGuardOnOwnConn(t *testing.T) {
	for _, tg := range targets() {
		if tg.d != sqlverifier.MySQL {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			ctx := t.Context()
			c := tg.conn(t)
			v := tg.verifier(t, c)
			res := verifiertest.Resource(t, "r")
			require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(1, "a"))) // the row
			for _, end := range []string{"ROLLBACK", "COMMIT"} {
				_, err := c.ExecContext(ctx, `START TRANSACTION`)
				require.NoError(t, err)
				require.NoError(t, v.Guard(ctx, c, res, verifiertest.Tok(2, "b")))
				_, err = c.ExecContext(ctx, end)
				require.NoError(t, err)
				if end == "ROLLBACK" {
					requireHighest(t, v, res, 1, "a")
				}
			}
			requireHighest(t, v, res, 2, "b")
			assert.Equal(t, 1, openStmts(t, c), "the guard's statement, prepared once on the Conn")
			require.NoError(t, v.Close())
			assert.Zero(t, openStmts(t, c))
		})
	}
}
