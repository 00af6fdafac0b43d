package pgverifier_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/internal/pausetest"
)

// dsn is the throwaway PostgreSQL that TestMain starts for the package, with
// the migrations applied. Tests keep apart by using their own resources.
var dsn string

func TestMain(m *testing.M) {
	pausetest.Child(holdPG) // a holder process of paused_test.go
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := testenv.StartPostgres(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pg.Close()
	dsn = pg.DSN()
	if err := applyMigrations(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func applyMigrations(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = migrations.Apply(ctx, conn)
	return err
}

// connect opens one connection that is closed when the test ends.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// connPool is a minimal pool of n connections that satisfies pgverifier.DB,
// for concurrent tests (the module does not depend on pgxpool). A connection
// found closed when it comes back (the server restarted) is replaced by a
// new one on its next use.
type connPool struct {
	dsn   string
	conns chan *pgx.Conn // nil entries: connect on use
}

func newConnPool(t testing.TB, dsn string, n int) *connPool {
	t.Helper()
	p := &connPool{dsn: dsn, conns: make(chan *pgx.Conn, n)}
	for range n {
		p.conns <- nil
	}
	t.Cleanup(func() {
		for range n {
			if c := <-p.conns; c != nil {
				c.Close(context.Background())
			}
		}
	})
	return p
}

func (p *connPool) take(ctx context.Context) (*pgx.Conn, error) {
	var c *pgx.Conn
	select {
	case c = <-p.conns:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c != nil && !c.IsClosed() {
		return c, nil
	}
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		p.conns <- nil
		return nil, err
	}
	return c, nil
}

func (p *connPool) put(c *pgx.Conn) {
	if c.IsClosed() {
		c = nil
	}
	p.conns <- c
}

func (p *connPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.take(ctx)
	if err != nil {
		return errRow{err}
	}
	return &poolRow{row: c.QueryRow(ctx, sql, args...), release: func() { p.put(c) }}
}

func (p *connPool) Begin(ctx context.Context) (pgx.Tx, error) {
	c, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		p.put(c)
		return nil, err
	}
	return &poolTx{Tx: tx, release: sync.OnceFunc(func() { p.put(c) })}, nil
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type poolRow struct {
	row     pgx.Row
	release func()
}

func (r *poolRow) Scan(dest ...any) error {
	defer r.release()
	return r.row.Scan(dest...)
}

type poolTx struct {
	pgx.Tx
	release func()
}

func (t *poolTx) Commit(ctx context.Context) error {
	defer t.release()
	return t.Tx.Commit(ctx)
}

func (t *poolTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}
