package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

func TestMySQLFilesFollowGolangMigrate(t *testing.T) {
	requireGolangMigrate(t, migrations.MySQLFS, "mysql")

	_, err := migrations.UpFor(sqlverifier.Dialect(0))
	assert.Error(t, err, "unknown dialect")
	pg, err := migrations.UpFor(sqlverifier.Postgres)
	require.NoError(t, err)
	all, err := migrations.Up()
	require.NoError(t, err)
	assert.Equal(t, all, pg, "Postgres through database/sql runs the same files")
}

// applyConcurrently runs ApplySQL from eight pools at once, as eight
// processes starting together would, and checks that each migration ran
// exactly once.
func applyConcurrently(t *testing.T, driver, dsn string, d sqlverifier.Dialect) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	ran := make([][]migrations.Migration, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			db, err := sql.Open(driver, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			ran[i], errs[i] = migrations.ApplySQL(ctx, db, d)
		})
	}
	wg.Wait()
	total := 0
	for i := range 8 {
		require.NoError(t, errs[i])
		total += len(ran[i])
	}
	all, err := migrations.UpFor(d)
	require.NoError(t, err)
	require.NotEmpty(t, all)
	assert.Equal(t, len(all), total, "each migration ran exactly once")
}

func TestApplySQLPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := testenv.NewPostgres(t)
	applyConcurrently(t, "pgx", pg.DSN(), sqlverifier.Postgres)

	db, err := sql.Open("pgx", pg.DSN())
	require.NoError(t, err)
	defer db.Close()
	var cols []string
	rows, err := db.QueryContext(ctx, `SELECT column_name || ' ' || data_type FROM information_schema.columns
		WHERE table_name = 'fence_tokens' ORDER BY ordinal_position`)
	require.NoError(t, err)
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		cols = append(cols, c)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"resource text", "seq bigint", "holder text", "updated_at timestamp with time zone", "lock_key text"}, cols)

	// ApplySQL and pgx's Apply share the record and the lock.
	conn, err := pgx.Connect(ctx, pg.DSN())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	ran, err := migrations.Apply(ctx, conn)
	require.NoError(t, err)
	assert.Empty(t, ran, "Apply sees what ApplySQL did")
}

func TestApplySQLMySQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := testenv.NewMariaDB(t)
	applyConcurrently(t, "mysql", m.DSN(), sqlverifier.MySQL)

	db, err := sql.Open("mysql", m.DSN())
	require.NoError(t, err)
	defer db.Close()
	again, err := migrations.ApplySQL(ctx, db, sqlverifier.MySQL)
	require.NoError(t, err)
	assert.Empty(t, again)

	rows, err := db.QueryContext(ctx, `SELECT CONCAT(column_name, ' ', column_type, ' ', is_nullable) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'fence_tokens' ORDER BY ordinal_position`)
	require.NoError(t, err)
	var cols []string
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		cols = append(cols, c)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{
		"resource varbinary(1024) NO", "seq bigint(20) unsigned NO", "holder varbinary(64) NO",
		"lock_key varbinary(512) YES", "updated_at datetime(6) NO",
	}, cols)

	// The CHECK holds seq to 0..2^53-1; names compare byte for byte.
	_, err = db.ExecContext(ctx, `INSERT INTO fence_tokens VALUES ('r', 9007199254740992, 'h', 'k', UTC_TIMESTAMP(6))`)
	assert.Error(t, err, "seq 2^53 violates the CHECK")
	_, err = db.ExecContext(ctx, `INSERT INTO fence_tokens VALUES ('r', 0, '', 'k', UTC_TIMESTAMP(6)), ('r ', 0, '', 'k', UTC_TIMESTAMP(6)),
		('R', 0, '', 'k', UTC_TIMESTAMP(6)), (?, 0, '', 'k', UTC_TIMESTAMP(6))`, strings.Repeat("é", 512))
	assert.NoError(t, err, "'r', 'r ' and 'R' are three resources; a 1024-byte name fits")

	// Each down file undoes its up file.
	downs, err := fs.Glob(migrations.MySQLFS, "mysql/*.down.sql")
	require.NoError(t, err)
	for i := len(downs) - 1; i >= 0; i-- {
		b, err := fs.ReadFile(migrations.MySQLFS, downs[i])
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, strings.TrimSuffix(strings.TrimSpace(string(b)), ";"))
		require.NoError(t, err, downs[i])
	}
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'fence_tokens'`).Scan(&n))
	assert.Zero(t, n)
}
