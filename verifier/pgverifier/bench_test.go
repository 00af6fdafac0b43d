package pgverifier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// benchUpdate is the write every way makes; $1 = 1. With an argument, pgx
// sends it as a prepared statement whichever way it goes (with none, a
// plain Exec would take the simple protocol, planned every time).
const benchUpdate = `UPDATE bench_accounts SET balance = balance + 1 WHERE id = $1`

func benchSetup(b *testing.B) (*pgx.Conn, *pgverifier.Verifier) {
	b.Helper()
	ctx := b.Context()
	conn := connect(b, dsn)
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING;
		CREATE TABLE IF NOT EXISTS bench_perrow (id int PRIMARY KEY, balance bigint NOT NULL,
			fence_seq bigint NOT NULL DEFAULT 0, fence_holder text NOT NULL DEFAULT '', fence_lock text);
		INSERT INTO bench_perrow (id, balance) VALUES (1, 0) ON CONFLICT DO NOTHING;
		UPDATE bench_perrow SET fence_seq = 0, fence_holder = '', fence_lock = NULL`)
	require.NoError(b, err)
	v, err := pgverifier.New(conn)
	require.NoError(b, err)
	return conn, v
}

func unguarded(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, benchUpdate, 1); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// BenchmarkUpdate compares one UPDATE in a transaction with the same UPDATE
// fenced by WithTx and by Exec, on one connection.
func BenchmarkUpdate(b *testing.B) {
	conn, v := benchSetup(b)
	res := verifiertest.Resource(b, "r")
	var seq uint64
	b.Run("unguarded", func(b *testing.B) {
		for b.Loop() {
			if err := unguarded(b.Context(), conn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded-withtx", func(b *testing.B) {
		for b.Loop() {
			seq++
			err := v.WithTx(b.Context(), res, verifiertest.Tok(seq, "h"), func(tx pgx.Tx) error {
				_, err := tx.Exec(b.Context(), benchUpdate, 1)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("guarded-exec", func(b *testing.B) {
		for b.Loop() {
			seq++
			if _, err := v.Exec(b.Context(), res+"/exec", verifiertest.Tok(seq, "h"), benchUpdate, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPerRow is benchUpdate by the per-row pattern of the package
// documentation: $1 seq, $2 holder, $3 the token's lock.
const benchPerRow = `UPDATE bench_perrow SET balance = balance + 1, fence_seq = $1, fence_holder = $2, fence_lock = $3
	WHERE id = 1 AND (fence_lock IS NULL OR fence_lock = $3) AND (fence_seq < $1 OR (fence_seq = $1 AND fence_holder = $2))`

// BenchmarkGuardOverhead runs, in every iteration, the same UPDATE four
// ways on one connection: in a plain transaction, fenced by WithTx (begin,
// guard, UPDATE, commit: one more round trip), fenced by Exec (begin,
// guard and UPDATE pipelined, commit: the same round trips as the plain
// one) and by the per-row pattern (begin, the UPDATE with the token's
// columns and condition, commit). Interleaving them, in a rotating order,
// means all see the same machine load. It reports the mean time of each
// and the ratios to the plain transaction.
func BenchmarkGuardOverhead(b *testing.B) {
	conn, v := benchSetup(b)
	ctx := b.Context()
	resTx := verifiertest.Resource(b, "tx")
	resExec := verifiertest.Resource(b, "exec")
	var seq uint64
	var spent [4]time.Duration // plain, WithTx, Exec, per-row
	ways := [4]func() error{
		func() error { return unguarded(ctx, conn) },
		func() error {
			return v.WithTx(ctx, resTx, verifiertest.Tok(seq, "h"), func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, benchUpdate, 1)
				return err
			})
		},
		func() error {
			_, err := v.Exec(ctx, resExec, verifiertest.Tok(seq, "h"), benchUpdate, 1)
			return err
		},
		func() error {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			tok := verifiertest.Tok(seq, "h")
			tag, err := tx.Exec(ctx, benchPerRow, int64(tok.Seq), tok.Holder, tok.Key)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("per-row write refused")
			}
			return tx.Commit(ctx)
		},
	}
	for b.Loop() {
		seq++
		for k := range 4 {
			w := int(seq+uint64(k)) % 4
			start := time.Now()
			if err := ways[w](); err != nil {
				b.Fatal(err)
			}
			spent[w] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "withtx-ns/op")
	b.ReportMetric(float64(spent[2].Nanoseconds())/n, "exec-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "withtx/plain")
	b.ReportMetric(float64(spent[3].Nanoseconds())/n, "perrow-ns/op")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "exec/plain")
	b.ReportMetric(float64(spent[3])/float64(spent[0]), "perrow/plain")
}
