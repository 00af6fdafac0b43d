package pgverifier_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// createLog creates a table in which fenced writes append their token; its
// bigserial id gives the order in which the writes were applied (the guard's
// row lock serializes writers of one resource until they commit).
func createLog(t testing.TB, conn *pgx.Conn, name string) string {
	t.Helper()
	table := pgx.Identifier{name}.Sanitize()
	_, err := conn.Exec(t.Context(), `CREATE TABLE `+table+` (
		id bigserial PRIMARY KEY, resource text NOT NULL, seq bigint NOT NULL, holder text NOT NULL)`)
	require.NoError(t, err)
	return table
}

func readLog(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table, resource string) ([]fence.Token, error) {
	rows, err := q.Query(ctx, `SELECT seq, holder FROM `+table+` WHERE resource = $1 ORDER BY id`, resource)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fence.Token, error) {
		var seq int64
		var tok fence.Token
		err := r.Scan(&seq, &tok.Holder)
		tok.Seq = uint64(seq)
		return tok, err
	})
}

// guardHarness fences writes with WithTx: guard first, then an INSERT into
// a log table, in one transaction.
func guardHarness(t *testing.T, v *pgverifier.Verifier, conn *pgx.Conn, logTable string) verifiertest.Harness {
	insert := func(tx pgx.Tx, resource string, tok fence.Token) error {
		_, err := tx.Exec(t.Context(), `INSERT INTO `+logTable+` (resource, seq, holder) VALUES ($1, $2, $3)`,
			resource, int64(tok.Seq), tok.Holder)
		return err
	}
	return verifiertest.Harness{
		V:       v,
		Highest: v.Highest,
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			return v.WithTx(ctx, resource, tok, func(tx pgx.Tx) error { return insert(tx, resource, tok) })
		},
		Log: func(ctx context.Context, resource string) ([]fence.Token, error) {
			return readLog(ctx, conn, logTable, resource)
		},
		FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
			return v.WithTx(ctx, resource, tok, func(tx pgx.Tx) error {
				if err := insert(tx, resource, tok); err != nil {
					return err
				}
				return errors.New("the write failed after its insert")
			})
		},
	}
}

func TestVerifier(t *testing.T) {
	conn := connect(t, dsn)
	logTable := createLog(t, conn, "verifier_log")
	v, err := pgverifier.New(newConnPool(t, dsn, 32))
	require.NoError(t, err)
	verifiertest.Run(t, guardHarness(t, v, conn, logTable))
}

// execHarness fences writes with Exec: the guard and an INSERT into a log
// table pipelined in one transaction.
func execHarness(t *testing.T, v *pgverifier.Verifier, conn *pgx.Conn, logTable string) verifiertest.Harness {
	h := guardHarness(t, v, conn, logTable)
	insert := `INSERT INTO ` + logTable + ` (resource, seq, holder) VALUES ($1, $2, $3)`
	h.Write = func(ctx context.Context, resource string, tok fence.Token) error {
		tag, err := v.Exec(ctx, resource, tok, insert, resource, int64(tok.Seq), tok.Holder)
		if err == nil && tag.RowsAffected() != 1 {
			return fmt.Errorf("Exec returned the tag %q", tag)
		}
		return err
	}
	h.FailWrite = func(ctx context.Context, resource string, tok fence.Token) error {
		// The holder column is NOT NULL.
		_, err := v.Exec(ctx, resource, tok, insert, resource, int64(tok.Seq), nil)
		return err
	}
	return h
}

func TestVerifierExec(t *testing.T) {
	conn := connect(t, dsn)
	logTable := createLog(t, conn, "exec_log")
	v, err := pgverifier.New(newConnPool(t, dsn, 32))
	require.NoError(t, err)
	verifiertest.Run(t, execHarness(t, v, conn, logTable))
}

func TestVerifierCustomTable(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `CREATE SCHEMA "odd schema"`)
	require.NoError(t, err)
	name := `fence"; DROP TABLE fence_tokens; --`
	table := pgx.Identifier{"odd schema", name}.Sanitize()
	_, err = conn.Exec(ctx, `CREATE TABLE `+table+` (LIKE fence_tokens INCLUDING ALL)`)
	require.NoError(t, err)

	v, err := pgverifier.New(conn, pgverifier.WithTable("odd schema", name))
	require.NoError(t, err)
	assert.Equal(t, table, v.Table())
	require.NoError(t, v.Claim(ctx, "r", verifiertest.Tok(3, "a")))
	verifiertest.RequireStale(t, v.Claim(ctx, "r", verifiertest.Tok(2, "a")), verifiertest.Tok(2, "a"), 3, "a")

	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
	assert.Equal(t, 1, n, "the claim went to the custom table")
	def, err := pgverifier.New(conn)
	require.NoError(t, err)
	seq, _, err := def.Highest(ctx, "r")
	require.NoError(t, err)
	assert.Zero(t, seq, "and not to fence_tokens, which still exists")

	for _, parts := range [][]string{nil, {""}, {"a", "b", "c"}, {"a\x00b"}, {strings.Repeat("t", 64)}} {
		_, err := pgverifier.New(conn, pgverifier.WithTable(parts...))
		assert.ErrorIs(t, err, pgverifier.ErrInvalid, "table %q", parts)
	}
	_, err = pgverifier.New(nil)
	assert.ErrorIs(t, err, pgverifier.ErrInvalid)
}

func TestVerifierMissingTable(t *testing.T) {
	v, err := pgverifier.New(connect(t, dsn), pgverifier.WithTable("no_such_table"))
	require.NoError(t, err)
	err = v.Claim(t.Context(), "r", verifiertest.Tok(1, "a"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, verifier.ErrStale)
	assert.ErrorContains(t, err, `relation "no_such_table" does not exist`)
}

// TestGuardRollback shows that a guard in the caller's own transaction (or
// savepoint) raises the high-water only if that transaction commits.
func TestGuardRollback(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn)
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	res := verifiertest.Resource(t, "r")
	require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(5, "a")))

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, v.Guard(ctx, tx, res, verifiertest.Tok(9, "b")))
	seq, _, err := readHighest(ctx, tx, res)
	require.NoError(t, err)
	assert.Equal(t, uint64(9), seq, "inside the transaction the claim is visible")
	require.NoError(t, tx.Rollback(ctx))
	requireHighest(t, v, res, 5, "a")

	// The same through a savepoint: the outer transaction commits, the
	// savepoint that held the claim does not.
	tx, err = conn.Begin(ctx)
	require.NoError(t, err)
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, v.Guard(ctx, sp, res, verifiertest.Tok(9, "b")))
	require.NoError(t, sp.Rollback(ctx))
	require.NoError(t, tx.Commit(ctx))
	requireHighest(t, v, res, 5, "a")

	// A WithTx on a verifier whose DB is a transaction uses a savepoint.
	tx, err = conn.Begin(ctx)
	require.NoError(t, err)
	inner, err := pgverifier.New(tx)
	require.NoError(t, err)
	require.NoError(t, inner.WithTx(ctx, res, verifiertest.Tok(7, "c"), func(pgx.Tx) error { return nil }))
	require.NoError(t, tx.Rollback(ctx))
	requireHighest(t, v, res, 5, "a")
}

func readHighest(ctx context.Context, q pgverifier.Querier, res string) (uint64, string, error) {
	var seq int64
	var holder string
	err := q.QueryRow(ctx, `SELECT seq, holder FROM fence_tokens WHERE resource = $1`, res).Scan(&seq, &holder)
	return uint64(seq), holder, err
}

func requireHighest(t testing.TB, v *pgverifier.Verifier, res string, seq uint64, holder string) {
	t.Helper()
	gotSeq, gotHolder, err := v.Highest(t.Context(), res)
	require.NoError(t, err)
	require.Equal(t, seq, gotSeq, "high-water seq")
	require.Equal(t, holder, gotHolder, "high-water holder")
}

// TestWithTxPanic checks that a panicking fn rolls back and the panic goes on.
func TestWithTxPanic(t *testing.T) {
	conn := connect(t, dsn)
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	res := verifiertest.Resource(t, "r")
	assert.PanicsWithValue(t, "boom", func() {
		_ = v.WithTx(t.Context(), res, verifiertest.Tok(3, "a"), func(pgx.Tx) error { panic("boom") })
	})
	requireHighest(t, v, res, 0, "")
	require.NoError(t, v.Claim(t.Context(), res, verifiertest.Tok(2, "a")), "the connection is usable again")
}

// TestWithTxRejectedSkipsFn checks that fn never runs for a stale token.
func TestWithTxRejectedSkipsFn(t *testing.T) {
	conn := connect(t, dsn)
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	res := verifiertest.Resource(t, "r")
	require.NoError(t, v.Claim(t.Context(), res, verifiertest.Tok(3, "a")))
	called := false
	err = v.WithTx(t.Context(), res, verifiertest.Tok(2, "b"), func(pgx.Tx) error { called = true; return nil })
	verifiertest.RequireStale(t, err, verifiertest.Tok(2, "b"), 3, "a")
	assert.False(t, called)
}
