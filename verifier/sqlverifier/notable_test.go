package sqlverifier_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// TestMissingTable: before the migrations ran, every call says to run
// them, naming the migration, and keeps the server's error (MariaDB's
// error 1146, PostgreSQL's 42P01).
func TestMissingTable(t *testing.T) {
	for _, tg := range []target{targets()[0], targets()[3]} {
		t.Run(tg.name, func(t *testing.T) {
			ctx := t.Context()
			conn := tg.conn(t)
			use := []string{`CREATE DATABASE IF NOT EXISTS unmigrated`, `USE unmigrated`}
			if tg.d == sqlverifier.Postgres {
				use = []string{`CREATE SCHEMA IF NOT EXISTS unmigrated`, `SET search_path TO unmigrated`}
			}
			for _, q := range use {
				_, err := conn.ExecContext(ctx, q)
				require.NoError(t, err)
			}
			tk := tok("m6", 1, "00000000-0000-4000-8000-000000000001")
			v := tg.verifier(t, conn)
			_, execErr := v.Exec(ctx, "m6", tk, tg.q(`SELECT 1`))
			_, _, highErr := v.Highest(ctx, "m6")
			for what, err := range map[string]error{
				"Claim": v.Claim(ctx, "m6", tk), "WithTx": v.WithTx(ctx, "m6", tk, func(*sql.Tx) error { return nil }),
				"Exec": execErr, "Highest": highErr,
			} {
				require.Error(t, err, what)
				assert.Contains(t, err.Error(), ": the table "+tg.ident("fence_tokens")+" does not exist: run migrations.ApplySQL first (migration 000001_fence_tokens creates it): ", what)
			}
			t.Logf("Claim: %v", v.Claim(ctx, "m6", tk))

			v = tg.verifier(t, conn, sqlverifier.WithTable("app_tokens"))
			err := v.Claim(ctx, "m6", tk)
			require.Error(t, err)
			assert.Contains(t, err.Error(), ": the table "+tg.ident("app_tokens")+" does not exist: create it as package migrations creates fence_tokens: ")
		})
	}
}
