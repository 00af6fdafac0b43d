package perf

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"   // the "mysql" driver, and its DSN
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// sqlBench is pgBench for the database/sql verifier: the same UPDATE in a
// transaction, unguarded and through sqlverifier.Exec and WithTx, on one
// connection, for one database. lock names the database in the results
// ("mariadb", "postgres-sql").
func sqlBench(ctx context.Context, run *runner, lock, driver, dsn string, d sqlverifier.Dialect) ([]report.Result, string, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", lock, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection, as for pg
	var version string
	if err := db.QueryRowContext(ctx, `SELECT version()`).Scan(&version); err != nil {
		return nil, "", fmt.Errorf("%s: %w", lock, err)
	}
	if _, err := migrations.ApplySQL(ctx, db, d); err != nil {
		return nil, version, err
	}
	update := `UPDATE fencelock_bench_accounts SET balance = balance + 1 WHERE id = ?`
	perRow := `UPDATE fencelock_bench_perrow SET balance = balance + 1, fence_seq = ?, fence_holder = ?, fence_lock = ?
		WHERE id = ? AND (fence_lock IS NULL OR fence_lock = ?) AND (fence_seq < ? OR (fence_seq = ? AND fence_holder = ?))`
	setup := []string{
		`CREATE TABLE IF NOT EXISTS fencelock_bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`,
		`INSERT IGNORE INTO fencelock_bench_accounts VALUES (1, 0)`,
		`CREATE TABLE IF NOT EXISTS fencelock_bench_perrow (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL,
			fence_seq BIGINT UNSIGNED NOT NULL, fence_holder VARBINARY(64) NOT NULL, fence_lock VARBINARY(512) NULL) ENGINE=InnoDB`,
		`INSERT IGNORE INTO fencelock_bench_perrow VALUES (1, 0, 0, '', NULL)`,
		perRowReset, // this run's tokens start at 1
	}
	if d == sqlverifier.Postgres {
		update = `UPDATE fencelock_bench_accounts SET balance = balance + 1 WHERE id = $1`
		perRow = pgPerRow
		setup = []string{
			`CREATE TABLE IF NOT EXISTS fencelock_bench_accounts (id bigint PRIMARY KEY, balance bigint NOT NULL)`,
			`INSERT INTO fencelock_bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING`,
			pgPerRowTable,
			`INSERT INTO fencelock_bench_perrow VALUES (1, 0, 0, '', NULL) ON CONFLICT DO NOTHING`,
			perRowReset,
		}
	}
	for _, q := range setup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, version, fmt.Errorf("%s: %w", lock, err)
		}
	}
	v, err := sqlverifier.New(db, d)
	if err != nil {
		return nil, version, err
	}
	resource := "bench-" + lock + "-" + run.id // the pg scenario fences "bench-"+run.id in the same table
	var seq uint64
	next := func() fence.Token {
		seq++
		return fence.Token{Key: resource, Seq: seq, Holder: "bench"}
	}
	guarded := func() error {
		_, err := v.Exec(ctx, resource, next(), update, 1)
		return err
	}
	guardedTx := func() error {
		return v.WithTx(ctx, resource, next(), func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, update, 1)
			return err
		})
	}
	unguarded := func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, update, 1); err != nil {
			return err
		}
		return tx.Commit()
	}
	// The per-row pattern (see package sqlverifier): the token on the
	// data row itself, the write conditional on it, in the same
	// transaction shape as sql_unguarded. Its ? order: seq, holder, lock,
	// id, lock, seq, seq, holder; PostgreSQL's $1 id, $2 seq, $3 holder,
	// $4 lock.
	perRowArgs := func(tok fence.Token) []any {
		seq := int64(tok.Seq)
		if d == sqlverifier.Postgres {
			return []any{1, seq, tok.Holder, tok.Key}
		}
		return []any{seq, tok.Holder, tok.Key, 1, tok.Key, seq, seq, tok.Holder}
	}
	perrow := func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, perRow, perRowArgs(next())...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("per-row write refused (%d rows, %v)", n, err)
		}
		return tx.Commit()
	}
	notes := map[string]string{
		"sql_unguarded":      "database/sql: BEGIN; UPDATE one row; COMMIT — one connection, sequential",
		"sql_guarded":        "sqlverifier.Exec: BEGIN; guard; UPDATE one row; COMMIT — one connection, sequential",
		"sql_guarded_withtx": "sqlverifier.WithTx: BEGIN; guard; UPDATE one row (caller's function); COMMIT",
		"sql_perrow":         "per-row pattern: BEGIN; UPDATE one row and its token columns, WHERE the token is accepted; COMMIT",
	}
	if d == sqlverifier.MySQL {
		how := "; no interpolateParams in the DSN: a statement with arguments is prepared, run and closed (2 round trips), but sqlverifier's guard goes as one text statement (1)"
		if cfg, err := mysql.ParseDSN(dsn); err == nil && cfg.InterpolateParams {
			how = "; interpolateParams=true in the DSN: one round trip per statement"
		}
		for k := range notes {
			notes[k] += how
		}
	}
	out, err := shapes(ctx, run, "sql", lock, []shape{
		{"sql_unguarded", unguarded}, {"sql_guarded", guarded}, {"sql_guarded_withtx", guardedTx}, {"sql_perrow", perrow}}, notes)
	return out, version, err
}
