package sqlverifier_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// benchSetup returns one connection to tg with the bench tables (see
// createBenchTables), a verifier on that connection, and the UPDATE.
func benchSetup(b *testing.B, tg target) (*sql.Conn, *sqlverifier.Verifier, string) {
	b.Helper()
	c := tg.conn(b)
	return c, tg.verifier(b, c), createBenchTables(b, tg, c)
}

// createBenchTables creates (if need be) the one-row bench_accounts and
// bench_perrow tables, with the per-row high-water reset, and returns the
// UPDATE of bench_accounts for tg.
func createBenchTables(tb testing.TB, tg target, c sqlverifier.Querier) string {
	tb.Helper()
	ctx := tb.Context()
	ddl, ins := `CREATE TABLE IF NOT EXISTS bench_accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`,
		`INSERT IGNORE INTO bench_accounts VALUES (1, 0)`
	perRowDDL, perRowIns := `CREATE TABLE IF NOT EXISTS bench_perrow (id INT PRIMARY KEY, balance BIGINT NOT NULL,
		fence_seq BIGINT UNSIGNED NOT NULL DEFAULT 0, fence_holder VARBINARY(64) NOT NULL DEFAULT '', fence_lock VARBINARY(512) NULL) ENGINE=InnoDB`,
		`INSERT IGNORE INTO bench_perrow (id, balance) VALUES (1, 0)`
	if tg.d == sqlverifier.Postgres {
		ddl, ins = `CREATE TABLE IF NOT EXISTS bench_accounts (id int PRIMARY KEY, balance bigint NOT NULL)`,
			`INSERT INTO bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING`
		perRowDDL, perRowIns = `CREATE TABLE IF NOT EXISTS bench_perrow (id int PRIMARY KEY, balance bigint NOT NULL,
			fence_seq bigint NOT NULL DEFAULT 0, fence_holder text NOT NULL DEFAULT '', fence_lock text)`,
			`INSERT INTO bench_perrow (id, balance) VALUES (1, 0) ON CONFLICT DO NOTHING`
	}
	reset := `UPDATE bench_perrow SET fence_seq = 0, fence_holder = '', fence_lock = NULL`
	for _, q := range []string{ddl, ins, perRowDDL, perRowIns, reset} {
		_, err := c.ExecContext(ctx, q)
		require.NoError(tb, err)
	}
	return tg.q(`UPDATE bench_accounts SET balance = balance + 1 WHERE id = ?`)
}

// plain runs update (with argument 1) in a transaction, unguarded.
func plain(ctx context.Context, c sqlverifier.DB, update string) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, update, 1); err != nil {
		return err
	}
	return tx.Commit()
}

// benchPerRow is the bench UPDATE by the per-row pattern of the package
// documentation. ? = seq, holder, lock, lock, seq, seq, holder.
const benchPerRow = `UPDATE bench_perrow SET balance = balance + 1, fence_seq = ?, fence_holder = ?, fence_lock = ?
	WHERE id = 1 AND (fence_lock IS NULL OR fence_lock = ?) AND (fence_seq < ? OR (fence_seq = ? AND fence_holder = ?))`

// BenchmarkGuardOverhead runs, in every iteration and on one connection,
// the same UPDATE five ways: alone (autocommit), in a plain transaction
// (begin, UPDATE, commit), fenced by Exec and fenced by WithTx (begin,
// guard, UPDATE, commit: one round trip more than the plain transaction
// once the resource's row exists), and by the per-row pattern (begin, the
// UPDATE with the token's columns and condition, commit: the plain
// transaction's round trips). Interleaving them, in a rotating order,
// means all see the same machine load. It reports the mean time of each
// and the ratios to the plain transaction, for each target.
//
// The "-durable" runs flush every commit to disk, as production servers
// do (the test servers otherwise skip it: innodb_flush_log_at_trx_commit=2,
// fsync=off); the fsync then weighs in both ways of writing.
func BenchmarkGuardOverhead(b *testing.B) {
	for _, tg := range targets() {
		for _, durable := range []bool{false, true} {
			name := tg.name
			if durable {
				name += "-durable"
			}
			b.Run(name, func(b *testing.B) {
				if durable {
					makeDurable(b, tg)
				}
				guardOverhead(b, tg)
			})
		}
	}
}

// makeDurable turns on flushing at commit for the test's duration.
func makeDurable(b *testing.B, tg target) {
	ctx := b.Context()
	on, off := []string{`SET GLOBAL innodb_flush_log_at_trx_commit = 1`}, []string{`SET GLOBAL innodb_flush_log_at_trx_commit = 2`}
	if tg.d == sqlverifier.Postgres {
		on = []string{`ALTER SYSTEM SET fsync = on`, `ALTER SYSTEM SET synchronous_commit = on`, `SELECT pg_reload_conf()`}
		off = []string{`ALTER SYSTEM RESET fsync`, `ALTER SYSTEM RESET synchronous_commit`, `SELECT pg_reload_conf()`}
	}
	db := tg.open(b)
	for _, q := range on {
		_, err := db.ExecContext(ctx, q)
		require.NoError(b, err)
	}
	b.Cleanup(func() {
		for _, q := range off {
			_, _ = db.ExecContext(context.WithoutCancel(ctx), q)
		}
	})
}

func guardOverhead(b *testing.B, tg target) {
	{
		{
			c, v, update := benchSetup(b, tg)
			ctx := b.Context()
			resExec := verifiertest.Resource(b, "exec")
			resTx := verifiertest.Resource(b, "tx")
			var seq uint64
			var spent [5]time.Duration // autocommit, plain tx, Exec, WithTx, per-row
			perRow := tg.q(benchPerRow)
			ways := [5]func() error{
				func() error { _, err := c.ExecContext(ctx, update, 1); return err },
				func() error { return plain(ctx, c, update) },
				func() error {
					_, err := v.Exec(ctx, resExec, verifiertest.Tok(seq, "h"), update, 1)
					return err
				},
				func() error {
					return v.WithTx(ctx, resTx, verifiertest.Tok(seq, "h"), func(tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, update, 1)
						return err
					})
				},
				func() error {
					tx, err := c.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					tok, s := verifiertest.Tok(seq, "h"), int64(seq)
					res, err := tx.ExecContext(ctx, perRow, s, tok.Holder, tok.Key, tok.Key, s, s, tok.Holder)
					if err != nil {
						return err
					}
					if n, err := res.RowsAffected(); err != nil || n != 1 {
						return fmt.Errorf("per-row write refused (%d rows, %v)", n, err)
					}
					return tx.Commit()
				},
			}
			for b.Loop() {
				seq++
				for k := range 5 {
					w := int(seq+uint64(k)) % 5
					start := time.Now()
					if err := ways[w](); err != nil {
						b.Fatal(err)
					}
					spent[w] += time.Since(start)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(spent[0].Nanoseconds())/n, "auto-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/n, "plain-ns/op")
			b.ReportMetric(float64(spent[2].Nanoseconds())/n, "exec-ns/op")
			b.ReportMetric(float64(spent[2])/float64(spent[1]), "exec/plain")
			b.ReportMetric(float64(spent[3])/float64(spent[1]), "withtx/plain")
			b.ReportMetric(float64(spent[2])/float64(spent[0]), "exec/auto")
			b.ReportMetric(float64(spent[4])/float64(spent[1]), "perrow/plain")
		}
	}
}
