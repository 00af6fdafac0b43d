package migrations_test

import (
	"context"
	"io/fs"
	"regexp"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/migrations"
)

// golangMigrate is golang-migrate's source file pattern
// (source/parse.go: DefaultParse).
var golangMigrate = regexp.MustCompile(`^([0-9]+)_(.*)\.(down|up)\.(.*)$`)

func TestFilesFollowGolangMigrate(t *testing.T) {
	requireGolangMigrate(t, migrations.FS, ".")
}

// requireGolangMigrate checks that the files in dir of fsys are
// golang-migrate's NNNNNN_name.{up,down}.sql, every up with its down, and
// that 000001_fence_tokens is among them.
func requireGolangMigrate(t *testing.T, fsys fs.FS, dir string) {
	t.Helper()
	entries, err := fs.ReadDir(fsys, dir)
	require.NoError(t, err)
	ups, downs := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		m := golangMigrate.FindStringSubmatch(e.Name())
		require.NotNil(t, m, "%s does not follow NNNNNN_name.{up,down}.sql", e.Name())
		assert.Len(t, m[1], 6, "%s: six-digit version", e.Name())
		assert.Equal(t, "sql", m[4])
		if m[3] == "up" {
			ups[m[1]+"_"+m[2]] = true
		} else {
			downs[m[1]+"_"+m[2]] = true
		}
	}
	assert.Equal(t, ups, downs, "every up has its down")
	assert.Contains(t, ups, "000001_fence_tokens")
}

func TestApply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := testenv.NewPostgres(t)
	conn, err := pgx.Connect(ctx, pg.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })

	// Eight processes starting at once: one applies, the others see it done.
	var wg sync.WaitGroup
	ran := make([][]migrations.Migration, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			c, err := pgx.Connect(ctx, pg.DSN())
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close(context.Background())
			ran[i], errs[i] = migrations.Apply(ctx, c)
		})
	}
	wg.Wait()
	total := 0
	for i := range 8 {
		require.NoError(t, errs[i])
		total += len(ran[i])
	}
	all, err := migrations.Up()
	require.NoError(t, err)
	assert.Equal(t, len(all), total, "each migration ran exactly once")

	var cols []string
	rows, err := conn.Query(ctx, `SELECT column_name || ' ' || data_type FROM information_schema.columns
		WHERE table_name = 'fence_tokens' ORDER BY ordinal_position`)
	require.NoError(t, err)
	cols, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"resource text", "seq bigint", "holder text", "updated_at timestamp with time zone", "lock_key text"}, cols)

	_, err = conn.Exec(ctx, `INSERT INTO fence_tokens (resource, seq, holder) VALUES ('r', -1, 'h')`)
	assert.ErrorContains(t, err, "check constraint", "seq is not negative (0 only after a move)")
	_, err = conn.Exec(ctx, `INSERT INTO fence_tokens (resource, seq, holder) VALUES ('r', 9007199254740992, 'h')`)
	assert.ErrorContains(t, err, "check constraint", "seq stays below 2^53")

	ran2, err := migrations.Apply(ctx, conn)
	require.NoError(t, err)
	assert.Empty(t, ran2, "a second Apply does nothing")

	// 000002's down file gives back 000001's table: seq from 1, no lock_key.
	_, err = conn.Exec(ctx, `INSERT INTO fence_tokens (resource, seq, holder, lock_key) VALUES ('moved', 0, '', 'l'), ('kept', 3, 'h', 'l')`)
	require.NoError(t, err)
	down2, err := fs.ReadFile(migrations.FS, "000002_fence_lock_binding.down.sql")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, string(down2))
	require.NoError(t, err)
	var kept int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM fence_tokens`).Scan(&kept))
	assert.Equal(t, 1, kept, "the moved row without a high-water is gone, the other kept")
	_, err = conn.Exec(ctx, `INSERT INTO fence_tokens (resource, seq, holder) VALUES ('r0', 0, 'h')`)
	assert.ErrorContains(t, err, "check constraint", "seq starts at 1 again")
	_, err = conn.Exec(ctx, all[1].SQL)
	require.NoError(t, err, "000002's up file runs again on top of its down")
	_, err = conn.Exec(ctx, string(down2))
	require.NoError(t, err)

	// The down file undoes the up file, and the up file is safe to run on a
	// database where the table already exists (as after a manual setup).
	down, err := fs.ReadFile(migrations.FS, "000001_fence_tokens.down.sql")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, string(down))
	require.NoError(t, err)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass('fence_tokens') IS NOT NULL`).Scan(&exists))
	assert.False(t, exists)
	_, err = conn.Exec(ctx, all[0].SQL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, all[0].SQL)
	require.NoError(t, err, "the up file is idempotent on its own")
}

func TestApplyInsideTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := testenv.NewPostgres(t)
	conn, err := pgx.Connect(ctx, pg.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	ran, err := migrations.Apply(ctx, tx)
	require.NoError(t, err)
	assert.NotEmpty(t, ran)
	require.NoError(t, tx.Rollback(ctx))
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass('fence_tokens') IS NOT NULL`).Scan(&exists))
	assert.False(t, exists, "the caller's rollback undid the migration")
}
