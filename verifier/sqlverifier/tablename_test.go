package sqlverifier_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// oddNames are table names that are SQL to a careless reader: a
// placeholder, comment markers, quotes. Each is quoted, so each works.
var oddNames = []string{"fence?tokens", "fence -- x", "-- fence", "f`e\"n?c'e -- ?", "?"}

// createLike creates table (quoted) with fence_tokens' columns, dropped
// first if it exists.
func (tg target) createLike(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	ctx := t.Context()
	like := `CREATE TABLE ` + table + ` LIKE fence_tokens`
	if tg.d == sqlverifier.Postgres {
		like = `CREATE TABLE ` + table + ` (LIKE fence_tokens INCLUDING ALL)`
	}
	_, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+table)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, like)
	require.NoError(t, err)
}

// TestOddTableNames runs every call on tables with odd names, on a pool
// and on a Conn, with the rows checked in the table itself, and the
// conformance kit on the first.
func TestOddTableNames(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		for i, name := range oddNames {
			table := tg.ident(name)
			tg.createLike(t, db, table)
			for _, on := range []string{"DB", "Conn"} {
				var d sqlverifier.DB = db
				if on == "Conn" {
					d = tg.conn(t)
				}
				v := tg.verifier(t, d, sqlverifier.WithTable(name))
				require.Equal(t, table, v.Table())
				res := verifiertest.Resource(t, on)
				a, b := verifiertest.Tok(3, "a"), verifiertest.Tok(4, "b")
				require.NoError(t, v.Claim(ctx, res, a), "%q", name)
				verifiertest.RequireStale(t, v.Claim(ctx, res, verifiertest.Tok(2, "a")), verifiertest.Tok(2, "a"), 3, "a")
				require.NoError(t, v.WithTx(ctx, res, a, func(*sql.Tx) error { return nil }), "repeat")
				_, err := v.Exec(ctx, res, b, tg.q(`SELECT 1 WHERE 1 = ?`), 1)
				require.NoError(t, err)
				// Guard in the caller's transaction, on the verifier's DB.
				tx, err := d.BeginTx(ctx, nil)
				require.NoError(t, err)
				require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(5, "c")))
				verifiertest.RequireStale(t, v.Guard(ctx, tx, res, b), b, 5, "c")
				require.NoError(t, tx.Commit())
				requireHighest(t, v, res, 5, "c")
				var seq int64
				var holder string
				require.NoError(t, db.QueryRowContext(ctx, `SELECT seq, holder FROM `+table+tg.q(` WHERE resource = ?`), res).Scan(&seq, &holder))
				assert.Equal(t, int64(5), seq, "the row in %s", table)
				assert.Equal(t, "c", holder)
				require.NoError(t, v.Move(ctx, res, a.Key, "other"))
				verifiertest.RequireForeign(t, v.Claim(ctx, res, verifiertest.Tok(6, "a")), res, verifiertest.Tok(6, "a"), "other")
				require.NoError(t, v.Close())
			}
			_, _, _, found := tg.row(t, db, verifiertest.Resource(t, "DB"))
			assert.False(t, found, "nothing went to fence_tokens")
			if i == 0 {
				v := tg.verifier(t, db, sqlverifier.WithTable(name))
				verifiertest.Run(t, guardHarness(tg, v, db, tg.createLog(t, db, "odd_log")))
			}
		}
	})
}

// TestTableNameControl checks that New refuses a table name part with a
// control character, saying so: a newline would end a comment line in the
// middle of the name.
func TestTableNameControl(t *testing.T) {
	db := targets()[0].open(t)
	for _, d := range []sqlverifier.Dialect{sqlverifier.MySQL, sqlverifier.Postgres} {
		for _, parts := range [][]string{{"fence\n-- x"}, {"app", "fence\ntokens"}, {"a\tb"}, {"a\rb"}, {"a\x7fb"}, {"a\u0085b"}} {
			_, err := sqlverifier.New(db, d, sqlverifier.WithTable(parts...))
			require.ErrorIs(t, err, sqlverifier.ErrInvalid, "%v %q", d, parts)
			assert.ErrorContains(t, err, "control character", "%v %q", d, parts)
		}
		_, err := sqlverifier.New(db, d, sqlverifier.WithTable(strings.Repeat("t", 65)))
		assert.ErrorContains(t, err, "longer than", "%v", d)
	}
}
