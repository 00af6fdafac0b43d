package perf

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// pgUpdate is the write both pg scenarios make, in a transaction.
const pgUpdate = `UPDATE fencelock_bench_accounts SET balance = balance + 1 WHERE id = $1`

// pgBench compares one UPDATE in a transaction with the same UPDATE after
// the verifier's guard (pgverifier.Exec: guard and UPDATE in one batch, and
// pgverifier.WithTx: guard, then the caller's function), on one
// connection, alternating in batches so both see the same load.
func pgBench(ctx context.Context, run *runner, dsn string) ([]report.Result, string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return nil, "", err
	}
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return nil, version, err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS fencelock_bench_accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO fencelock_bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING`); err != nil {
		return nil, version, err
	}
	v, err := pgverifier.New(conn)
	if err != nil {
		return nil, version, err
	}
	resource := "bench-" + run.id
	var seq uint64
	guarded := func() error {
		seq++
		tok := fence.Token{Key: resource, Seq: seq, Holder: "bench"}
		_, err := v.Exec(ctx, resource, tok, pgUpdate, 1)
		return err
	}
	guardedTx := func() error {
		seq++
		tok := fence.Token{Key: resource, Seq: seq, Holder: "bench"}
		return v.WithTx(ctx, resource, tok, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, pgUpdate, 1)
			return err
		})
	}
	unguarded := func() error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, pgUpdate, 1); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	kinds := []struct {
		scenario string
		fn       func() error
	}{{"pg_unguarded", unguarded}, {"pg_guarded", guarded}, {"pg_guarded_withtx", guardedTx}}
	samples := make([][]time.Duration, len(kinds))
	spent := make([]time.Duration, len(kinds))
	for _, k := range kinds { // warm up: prepared statement cache, row
		for range 20 {
			if err := k.fn(); err != nil {
				return nil, version, fmt.Errorf("%s: %w", k.scenario, err)
			}
		}
	}
	sz := run.sizes
	for round := range sz.pgRounds {
		for i, k := range kinds {
			run.step("pg", k.scenario, round+1, sz.pgRounds)
			for range sz.pgBatch {
				t0 := time.Now()
				if err := k.fn(); err != nil {
					return nil, version, fmt.Errorf("%s: %w", k.scenario, err)
				}
				d := time.Since(t0)
				samples[i] = append(samples[i], d)
				spent[i] += d
			}
		}
	}
	out := make([]report.Result, len(kinds))
	for i, k := range kinds {
		out[i] = report.Result{Lock: "postgres", Scenario: k.scenario,
			OpsPerSec: report.Ptr(float64(len(samples[i])) / spent[i].Seconds()),
			Note:      "BEGIN; UPDATE one row; COMMIT — one connection, sequential"}
		switch k.scenario {
		case "pg_guarded":
			out[i].Note = "pgverifier.Exec: BEGIN; guard and UPDATE one row in one batch; COMMIT — one connection, sequential"
		case "pg_guarded_withtx":
			out[i].Note = "pgverifier.WithTx: BEGIN; guard; UPDATE one row (caller's function); COMMIT — one connection, sequential"
		}
		setLatency(&out[i], samples[i])
	}
	return out, version, nil
}
