package pgverifier_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// TestMissingTable: before the migrations ran, every call says to run
// them, naming the migration, and keeps the server's error.
func TestMissingTable(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS unmigrated; SET search_path TO unmigrated`)
	require.NoError(t, err)
	tk := fence.Token{Key: "m6", Seq: 1, Holder: "00000000-0000-4000-8000-000000000001"}
	noop := func(pgx.Tx) error { return nil }

	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	_, execErr := v.Exec(ctx, "m6", tk, `SELECT 1`)
	_, _, highErr := v.Highest(ctx, "m6")
	for what, err := range map[string]error{
		"Claim": v.Claim(ctx, "m6", tk), "WithTx": v.WithTx(ctx, "m6", tk, noop), "Exec": execErr, "Highest": highErr,
	} {
		require.Error(t, err, what)
		assert.Contains(t, err.Error(), `: the table "fence_tokens" does not exist: run migrations.Apply first (migration 000001_fence_tokens creates it): `, what)
		var pe *pgconn.PgError
		assert.True(t, errors.As(err, &pe) && pe.Code == "42P01", "%s: the server's error stays in the chain: %v", what, err)
	}
	t.Logf("Claim: %v", v.Claim(ctx, "m6", tk))

	v, err = pgverifier.New(conn, pgverifier.WithTable("app_tokens"))
	require.NoError(t, err)
	err = v.Claim(ctx, "m6", tk)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `: the table "app_tokens" does not exist: create it as package migrations creates fence_tokens: `)

	// A missing table in the caller's own statement is the caller's.
	v, err = pgverifier.New(connect(t, dsn))
	require.NoError(t, err)
	_, err = v.Exec(ctx, "m6/own", tk, `UPDATE no_such_table SET x = 1`)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "migrations")
}
