package sqlverifier_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// preparedCount is the server's count of prepared statements, all sessions.
func preparedCount(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), `SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'`).Scan(&name, &n))
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
			counter := tg.open(t)
			for _, on := range []string{"DB", "Conn"} {
				t.Run(on, func(t *testing.T) {
					pool := tg.open(t)
					pool.SetMaxOpenConns(2)
					var d sqlverifier.DB = pool
					if on == "Conn" {
						d = tg.conn(t)
					}
					before := preparedCount(t, counter)
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
					open := preparedCount(t, counter) - before
					assert.Positive(t, open, "the guard is prepared")
					assert.LessOrEqual(t, open, 2, "at most once per connection")
					require.NoError(t, v.Close())
					assert.Equal(t, before, preparedCount(t, counter), "Close closes it everywhere")
					require.NoError(t, v.Close(), "again")
					require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(200, "a")), "usable after Close")
					assert.Equal(t, before, preparedCount(t, counter), "and prepares nothing more")
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
