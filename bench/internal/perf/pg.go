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

// pgPerRow is the same write by the per-row pattern (see package
// pgverifier): the token's columns on the row itself, the write
// conditional on them. $1 id, $2 seq, $3 holder, $4 the token's lock.
const (
	pgPerRowTable = `CREATE TABLE IF NOT EXISTS fencelock_bench_perrow (id bigint PRIMARY KEY, balance bigint NOT NULL,
		fence_seq bigint NOT NULL, fence_holder text NOT NULL, fence_lock text)`
	// perRowReset forgets the per-row high-water of an earlier run (both
	// dialects): each run's tokens start at 1.
	perRowReset = `UPDATE fencelock_bench_perrow SET fence_seq = 0, fence_holder = '', fence_lock = NULL WHERE id = 1`
	pgPerRow    = `UPDATE fencelock_bench_perrow SET balance = balance + 1, fence_seq = $2, fence_holder = $3, fence_lock = $4
		WHERE id = $1 AND (fence_lock IS NULL OR fence_lock = $4) AND (fence_seq < $2 OR (fence_seq = $2 AND fence_holder = $3))`
)

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
		INSERT INTO fencelock_bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING;
		`+pgPerRowTable+`;
		INSERT INTO fencelock_bench_perrow VALUES (1, 0, 0, '', NULL) ON CONFLICT DO NOTHING;
		`+perRowReset); err != nil {
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
	perrow := func() error {
		seq++
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		tag, err := tx.Exec(ctx, pgPerRow, 1, int64(seq), "bench", resource)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("per-row write refused (%d rows)", tag.RowsAffected())
		}
		return tx.Commit(ctx)
	}
	notes := map[string]string{
		"pg_unguarded":      "BEGIN; UPDATE one row; COMMIT — one connection, sequential",
		"pg_guarded":        "pgverifier.Exec: BEGIN; guard and UPDATE one row in one batch; COMMIT — one connection, sequential",
		"pg_guarded_withtx": "pgverifier.WithTx: BEGIN; guard; UPDATE one row (caller's function); COMMIT — one connection, sequential",
		"pg_perrow":         "per-row pattern: BEGIN; UPDATE one row and its token columns, WHERE the token is accepted; COMMIT — one connection, sequential",
	}
	out, err := shapes(ctx, run, "pg", "postgres", []shape{
		{"pg_unguarded", unguarded}, {"pg_guarded", guarded}, {"pg_guarded_withtx", guardedTx}, {"pg_perrow", perrow}}, notes)
	return out, version, err
}

// shape is one way of making the same write.
type shape struct {
	scenario string
	fn       func() error
}

// shapes times each shape's write after a warm-up (prepared statements,
// the rows), interleaved like the locks: in each round every shape makes
// a batch of writes, in turn. A round's figure is the p50 of its batch, so
// each shape's figures can be paired with the unguarded write's of the
// same round. It returns one result per shape for lock, and the first
// error of a write (which ends the run).
func shapes(ctx context.Context, run *runner, group, lock string, ks []shape, notes map[string]string) ([]report.Result, error) {
	for _, k := range ks {
		for range 20 {
			if err := k.fn(); err != nil {
				return nil, fmt.Errorf("%s: %w", k.scenario, err)
			}
		}
	}
	sz := run.sizes
	samples := make([][]time.Duration, len(ks))
	spent := make([]time.Duration, len(ks))
	stepNames := make([]string, len(ks))
	for i, k := range ks {
		stepNames[i] = lock + " " + k.scenario
	}
	ictx, stop := context.WithCancel(ctx) // stop: a write failed
	defer stop()
	var failed error
	figs := interleave(ictx, run, group, sz.pgRounds, stepNames, func(_, i int) float64 {
		batch := make([]time.Duration, 0, sz.pgBatch)
		for range sz.pgBatch {
			t0 := time.Now()
			if err := ks[i].fn(); err != nil {
				failed = fmt.Errorf("%s: %w", ks[i].scenario, err)
				stop()
				break
			}
			batch = append(batch, time.Since(t0))
		}
		samples[i] = append(samples[i], batch...)
		for _, d := range batch {
			spent[i] += d
		}
		return p50Of(batch)
	})
	if failed != nil {
		return nil, failed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]report.Result, len(ks))
	for i, k := range ks {
		out[i] = report.Result{Lock: lock, Scenario: k.scenario, PerRound: figs[i],
			OpsPerSec: report.Ptr(float64(len(samples[i])) / spent[i].Seconds()),
			Note:      fmt.Sprintf("%s; %d rounds × %d per write, interleaved", notes[k.scenario], sz.pgRounds, sz.pgBatch)}
		setLatency(&out[i], samples[i])
	}
	return out, nil
}
