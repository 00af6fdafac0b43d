package testenv

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMariaDB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := NewMariaDB(t)
	assert.True(t, strings.HasPrefix(m.DSN(), "root@tcp(127.0.0.1:"), m.DSN())
	assert.NotEqual(t, 3306, m.Port(), "never the system server's port")
	db, err := sql.Open("mysql", m.DSN())
	require.NoError(t, err)
	defer db.Close()
	count := func() (n int) {
		t.Helper()
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n))
		return n
	}
	exec := func(q string) {
		t.Helper()
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	var dbName string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName))
	assert.Equal(t, DatabaseName, dbName)
	exec("CREATE TABLE t (id int primary key) ENGINE=InnoDB")
	exec("INSERT INTO t VALUES (1), (2)")

	require.NoError(t, m.Stop())
	require.Error(t, db.PingContext(ctx), "server is down")
	require.NoError(t, m.Start(ctx))
	assert.Equal(t, 2, count(), "data kept across Stop/Start")

	require.NoError(t, m.Kill())
	require.NoError(t, m.Start(ctx))
	assert.Equal(t, 2, count(), "committed data kept across Kill/Start once flushed (it was, at Stop)")
	exec("INSERT INTO t VALUES (3)")
	assert.Equal(t, 3, count())
	assert.Error(t, m.Start(ctx), "already running")

	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = os.Stat(m.Dir())
	assert.True(t, os.IsNotExist(err), "dir removed")
	assert.ErrorIs(t, m.Start(ctx), ErrClosed)
}

func TestMariaDBOrStart(t *testing.T) {
	ctx := t.Context()
	t.Setenv("MYSQL_DSN", "u:p@tcp(example:3306)/db")
	dsn, closeFn, err := MariaDBOrStart(ctx)
	require.NoError(t, err)
	assert.Equal(t, "u:p@tcp(example:3306)/db", dsn, "MYSQL_DSN was used")
	closeFn()

	t.Setenv("MYSQL_DSN", "")
	dsn, closeFn, err = MariaDBOrStart(ctx)
	require.NoError(t, err)
	defer closeFn()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	assert.Equal(t, DatabaseName, cfg.DBName)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.PingContext(ctx))
}

func TestMariaDBStartHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := StartMariaDB(ctx)
	require.ErrorIs(t, err, context.Canceled)
}
