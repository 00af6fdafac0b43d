package pgverifier_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/leasectx"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// TestBoundEveryWay: WithTx, WithTxAll and Exec, given a context that
// carries a lease's deadline (as lease.Lease.Context does) and no deadline
// of its own, have the server end a statement that runs past it (SQLSTATE
// 57014) and a transaction that idles past it (the session is closed);
// without it, neither is bounded.
func TestBoundEveryWay(t *testing.T) {
	var v *pgverifier.Verifier
	fresh := func() { // a connection the server has not closed
		var err error
		v, err = pgverifier.New(connect(t, dsn))
		require.NoError(t, err)
	}
	fresh()
	var seq uint64
	tk := func() fence.Token {
		seq++
		return fence.Token{Key: "bound", Seq: seq, Holder: "00000000-0000-4000-8000-000000000001"}
	}
	res := "bound/" + t.Name()
	leaseCtx := func() context.Context {
		end := time.Now().Add(300 * time.Millisecond)
		return leasectx.With(t.Context(), func() time.Time { return end })
	}
	sleep := func(ctx context.Context, tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT pg_sleep(1)`); return err }
	ways := map[string]func(ctx context.Context, fn func(pgx.Tx) error) error{
		"WithTx": func(ctx context.Context, fn func(pgx.Tx) error) error { return v.WithTx(ctx, res, tk(), fn) },
		"WithTxAll": func(ctx context.Context, fn func(pgx.Tx) error) error {
			return v.WithTxAll(ctx, map[string]fence.Token{res: tk()}, fn)
		},
	}
	for name, way := range ways {
		ctx := leaseCtx()
		err := way(ctx, func(tx pgx.Tx) error { return sleep(ctx, tx) })
		var pe *pgconn.PgError
		assert.True(t, errors.As(err, &pe) && pe.Code == "57014", "%s: a statement past the lease: %v", name, err)

		ctx = leaseCtx()
		err = way(ctx, func(tx pgx.Tx) error {
			time.Sleep(time.Second) // idle in the transaction, past the lease
			_, err := tx.Exec(ctx, `SELECT 1`)
			return err
		})
		assert.Error(t, err, "%s: idle past the lease", name)
		fresh()

		require.NoError(t, way(t.Context(), func(tx pgx.Tx) error { return sleep(t.Context(), tx) }), "%s: no lease, no bound", name)
	}
	_, err := v.Exec(leaseCtx(), res, tk(), `SELECT pg_sleep(1)`)
	var pe *pgconn.PgError
	assert.True(t, errors.As(err, &pe) && pe.Code == "57014", "Exec: a statement past the lease: %v", err)
	_, err = v.Exec(t.Context(), res, tk(), `SELECT pg_sleep(0.5)`)
	require.NoError(t, err, "Exec: no lease, no bound")

	// A *pgxpool.Pool, which most callers pass, is bounded the same way.
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	pv, err := pgverifier.New(pool)
	require.NoError(t, err)
	_, err = pv.Exec(leaseCtx(), res, tk(), `SELECT pg_sleep(1)`)
	assert.True(t, errors.As(err, &pe) && pe.Code == "57014", "Exec on a pool: a statement past the lease: %v", err)
}
