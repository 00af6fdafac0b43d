package perf

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
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
	setup := []string{
		`CREATE TABLE IF NOT EXISTS fencelock_bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`,
		`INSERT IGNORE INTO fencelock_bench_accounts VALUES (1, 0)`,
	}
	if d == sqlverifier.Postgres {
		update = `UPDATE fencelock_bench_accounts SET balance = balance + 1 WHERE id = $1`
		setup = []string{
			`CREATE TABLE IF NOT EXISTS fencelock_bench_accounts (id bigint PRIMARY KEY, balance bigint NOT NULL)`,
			`INSERT INTO fencelock_bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING`,
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
	notes := map[string]string{
		"sql_unguarded":      "database/sql: BEGIN; UPDATE one row; COMMIT — one connection, sequential",
		"sql_guarded":        "sqlverifier.Exec: BEGIN; guard; UPDATE one row; COMMIT — one connection, sequential",
		"sql_guarded_withtx": "sqlverifier.WithTx: BEGIN; guard; UPDATE one row (caller's function); COMMIT",
	}
	out, err := shapes(run, "sql", lock, []shape{
		{"sql_unguarded", unguarded}, {"sql_guarded", guarded}, {"sql_guarded_withtx", guardedTx}}, notes)
	return out, version, err
}
