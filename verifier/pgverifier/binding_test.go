package pgverifier_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// A row written before migration 000002 has no lock: it keeps its
// high-water, and adopts the lock of the next token it accepts.
func TestLegacyRowAdoptsLock(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn)
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	res := verifiertest.Resource(t, "legacy")
	_, err = conn.Exec(ctx, `INSERT INTO fence_tokens (resource, seq, holder) VALUES ($1, 7, 'a')`, res)
	require.NoError(t, err)

	lock, err := v.Lock(ctx, res)
	require.NoError(t, err)
	assert.Empty(t, lock, "bound to no lock yet")
	verifiertest.RequireStale(t, v.Claim(ctx, res, verifiertest.TokOf("other", 6, "b")), verifiertest.TokOf("other", 6, "b"), 7, "a")
	lock, err = v.Lock(ctx, res)
	require.NoError(t, err)
	assert.Empty(t, lock, "a refused token binds nothing")

	require.NoError(t, v.Claim(ctx, res, verifiertest.TokOf("orders/1", 8, "b")))
	lock, err = v.Lock(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, "orders/1", lock)
	verifiertest.RequireForeign(t, v.Claim(ctx, res, verifiertest.TokOf("other", 9, "c")), res, verifiertest.TokOf("other", 9, "c"), "orders/1")
}

// An error in the caller's statement is the caller's, not the guard's:
// pgx prepares a batch's statements before it runs the first, so the
// statement's syntax error arrives where the guard's result is read.
func TestExecBlamesTheStatement(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn)
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	res := verifiertest.Resource(t, "r")

	for name, sql := range map[string]string{
		"syntax":         "SELEC nonsense",
		"missing table":  "UPDATE no_such_table SET x = 1",
		"runtime":        "SELECT 1/0",
		"missing column": "UPDATE fence_tokens SET no_such_column = 1",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.Exec(ctx, res, verifiertest.Tok(5, "a"), sql)
			require.Error(t, err)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "the server's error is in the chain: %v", err)
			assert.NotContains(t, err.Error(), "guard", "the guard is not blamed: %v", err)
			assert.Contains(t, err.Error(), "pgverifier: exec:")
			seq, _, err := v.Highest(ctx, res)
			require.NoError(t, err)
			assert.Zero(t, seq, "nothing was claimed")
		})
	}

	// The guard is still blamed when it is the guard that fails.
	bad, err := pgverifier.New(conn, pgverifier.WithTable("no_such_fence_table"))
	require.NoError(t, err)
	_, err = bad.Exec(ctx, res, verifiertest.Tok(5, "a"), "SELECT 1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "guard")
	assert.NotErrorIs(t, err, verifier.ErrStale)
}

// Arguments that do not fit the caller's statement are the caller's error.
func TestExecBlamesTheArguments(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn) // pgx closes a conn after a batch it could not build
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	_, err = v.Exec(ctx, verifiertest.Resource(t, "r"), verifiertest.Tok(5, "a"), "SELECT $1::int")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "guard", "%v", err)
	assert.Contains(t, err.Error(), "pgverifier: exec:")
}

// A Claim that races a Move of its resource to the Claim's own lock is
// either accepted (after the move) or foreign (before it), never reported
// as stale against a high-water the Claim did not see: the reason of a
// refusal read after the guard's transaction ended is checked, and the
// guard retried when it no longer holds.
func TestClaimRacingMove(t *testing.T) {
	ctx := t.Context()
	pool := newConnPool(t, dsn, 4)
	v, err := pgverifier.New(pool)
	require.NoError(t, err)
	stale, foreign, accepted := 0, 0, 0
	for i := range 200 {
		res := verifiertest.Resource(t, "r")
		require.NoError(t, v.Claim(ctx, res, verifiertest.TokOf("a", 10, "h")), "round %d", i)
		moved := make(chan error, 1)
		go func() { moved <- v.Move(ctx, res, "a", "b") }()
		err := v.Claim(ctx, res, verifiertest.TokOf("b", 5, "h"))
		require.NoError(t, <-moved)
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, verifier.ErrForeign):
			foreign++
		case errors.Is(err, verifier.ErrStale):
			stale++
			t.Errorf("round %d: %v", i, err)
		default:
			t.Fatalf("round %d: %v", i, err)
		}
	}
	t.Logf("accepted %d, foreign %d, stale %d", accepted, foreign, stale)
}

func TestClockBound(t *testing.T) {
	v, err := pgverifier.New(connect(t, dsn), pgverifier.WithClockBound(24*time.Hour))
	require.NoError(t, err)
	verifiertest.ClockBound(t, v, 24*time.Hour, func(ctx context.Context, res string) uint64 {
		seq, _, err := v.Highest(ctx, res)
		require.NoError(t, err)
		return seq
	})
	_, err = pgverifier.New(connect(t, dsn), pgverifier.WithClockBound(-time.Second))
	assert.ErrorIs(t, err, verifier.ErrInvalid)
}
