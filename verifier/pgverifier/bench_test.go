package pgverifier_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

const benchUpdate = `UPDATE bench_accounts SET balance = balance + 1 WHERE id = 1`

func benchSetup(b *testing.B) (*pgx.Conn, *pgverifier.Verifier) {
	b.Helper()
	ctx := b.Context()
	conn := connect(b, dsn)
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO bench_accounts VALUES (1, 0) ON CONFLICT DO NOTHING`)
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
	if _, err := tx.Exec(ctx, benchUpdate); err != nil {
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
				_, err := tx.Exec(b.Context(), benchUpdate)
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
			if _, err := v.Exec(b.Context(), res+"/exec", verifiertest.Tok(seq, "h"), benchUpdate); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGuardOverhead runs, in every iteration, the same UPDATE three
// ways on one connection: in a plain transaction, fenced by WithTx (begin,
// guard, UPDATE, commit: one more round trip) and fenced by Exec (begin,
// guard and UPDATE pipelined, commit: the same round trips as the plain
// one). Interleaving them, in a rotating order, means all three see the same
// machine load. It reports the mean time of each and the ratios to the
// plain transaction.
func BenchmarkGuardOverhead(b *testing.B) {
	conn, v := benchSetup(b)
	ctx := b.Context()
	resTx := verifiertest.Resource(b, "tx")
	resExec := verifiertest.Resource(b, "exec")
	var seq uint64
	var spent [3]time.Duration // plain, WithTx, Exec
	ways := [3]func() error{
		func() error { return unguarded(ctx, conn) },
		func() error {
			return v.WithTx(ctx, resTx, verifiertest.Tok(seq, "h"), func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, benchUpdate)
				return err
			})
		},
		func() error {
			_, err := v.Exec(ctx, resExec, verifiertest.Tok(seq, "h"), benchUpdate)
			return err
		},
	}
	for b.Loop() {
		seq++
		for k := range 3 {
			w := int(seq+uint64(k)) % 3
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
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "exec/plain")
}
