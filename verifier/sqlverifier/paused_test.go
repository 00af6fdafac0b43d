package sqlverifier_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/leasectx"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/pausetest"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// pausedTable records who wrote under the lock.
const pausedTable = "paused_writes"

// holdSQL is the frozen holder: WithTx with its lease's context, a write,
// then the pause. arg is the target's name.
func holdSQL(ctx context.Context, arg, resource string, tok fence.Token, inside func()) error {
	name, dsn, _ := strings.Cut(arg, " ")
	tg := target{name: name, d: sqlverifier.MySQL, driver: "mysql", dsn: dsn}
	if name == "postgres" {
		tg.d, tg.driver = sqlverifier.Postgres, "pgx"
	}
	db, err := sql.Open(tg.driver, tg.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := sqlverifier.New(db, tg.d)
	if err != nil {
		return err
	}
	defer v.Close()
	return v.WithTx(ctx, resource, tok, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, tg.q(`INSERT INTO `+pausedTable+` (resource, who) VALUES (?, 'paused')`), resource); err != nil {
			return err
		}
		inside()
		return nil
	})
}

// TestPausedHolderDoesNotHoldTheRow: a holder frozen (SIGSTOP) inside
// WithTx, its lease's context passed, holds the resource's row only until
// its lease ends (on MySQL, rounded up to a second): the server then
// closes its session. The next holder writes while it is still frozen,
// and its commit fails when it resumes. Without the bound, the next holder
// waits for the frozen one to resume.
func TestPausedHolderDoesNotHoldTheRow(t *testing.T) {
	r := testenv.NewRedis(t)
	for _, tg := range []target{targets()[0], targets()[3]} { // MariaDB, PostgreSQL
		t.Run(tg.name, func(t *testing.T) {
			ctx := t.Context()
			db := tg.open(t)
			_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+pausedTable+` (resource VARCHAR(200) NOT NULL, who VARCHAR(20) NOT NULL)`)
			require.NoError(t, err)
			name := "paused/" + t.Name()
			const ttl = 2 * time.Second
			v := tg.verifier(t, db)
			out := pausetest.Run(t, r.Addr(), tg.name+" "+tg.dsn, name, ttl, func(ctx context.Context, tok fence.Token) error {
				return v.WithTx(ctx, name, tok, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, tg.q(`INSERT INTO `+pausedTable+` (resource, who) VALUES (?, 'next')`), name)
					return err
				})
			})
			t.Logf("the next holder wrote %v after the freeze (ttl %v); the frozen holder, resumed: %s",
				out.Took.Round(time.Millisecond), ttl, out.HolderErr)
			require.NoError(t, out.NextErr, "the next holder")
			assert.True(t, out.StoppedAfter, "the next holder wrote while the other was frozen")
			assert.NotEmpty(t, out.HolderErr, "the frozen holder's commit failed")

			rows, err := db.QueryContext(ctx, tg.q(`SELECT who FROM `+pausedTable+` WHERE resource = ?`), name)
			require.NoError(t, err)
			defer rows.Close()
			var who []string
			for rows.Next() {
				var w string
				require.NoError(t, rows.Scan(&w))
				who = append(who, w)
			}
			require.NoError(t, rows.Err())
			assert.Equal(t, []string{"next"}, who, "only the next holder's write is in")
			requireHighest(t, v, name, out.Next.Seq, out.Next.Holder)
		})
	}
}

// TestBoundGivesTheSessionBack: on MySQL a bounded transaction lowers the
// session's wait_timeout; the session (the pool's one connection, or the
// verifier's *sql.Conn) has its own value back afterwards, after a commit
// and after a refusal.
func TestBoundGivesTheSessionBack(t *testing.T) {
	tg := targets()[0]
	db := tg.open(t)
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	_, err := db.ExecContext(ctx, `SET SESSION wait_timeout = 1234`)
	require.NoError(t, err)
	waitTimeout := func(q sqlverifier.Querier) int {
		var n int
		require.NoError(t, q.QueryRowContext(ctx, `SELECT @@SESSION.wait_timeout`).Scan(&n))
		return n
	}
	require.Equal(t, 1234, waitTimeout(db))
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, on := range []string{"DB", "Conn"} {
		var vdb sqlverifier.DB = db
		if on == "Conn" {
			c, err := db.Conn(ctx)
			require.NoError(t, err)
			defer c.Close()
			vdb = c
		}
		v := tg.verifier(t, vdb)
		res := "bound/" + t.Name() + "/" + on
		var inside int
		require.NoError(t, v.WithTx(bounded, res, tok("b", 2, "h"), func(tx *sql.Tx) error {
			inside = waitTimeout(tx)
			return nil
		}))
		assert.Equal(t, 60, inside, on+": bounded inside")
		assert.Equal(t, 1234, waitTimeout(vdb), on+": given back after a commit")
		err := v.WithTx(bounded, res, tok("b", 1, "h"), func(*sql.Tx) error { return nil })
		require.ErrorIs(t, err, verifier.ErrStale)
		assert.Equal(t, 1234, waitTimeout(vdb), on+": given back after a refusal")
	}
}

// TestBoundWithTxAllAndExec: WithTxAll, given a context that carries a
// lease's deadline (as lease.Lease.Context does), has the server end a
// transaction that idles past it (on MySQL, rounded up to a second); on
// PostgreSQL, Exec's statement that runs past it too (SQLSTATE 57014).
func TestBoundWithTxAllAndExec(t *testing.T) {
	for _, tg := range []target{targets()[0], targets()[3]} {
		t.Run(tg.name, func(t *testing.T) {
			v := tg.verifier(t, tg.open(t))
			res := "bound/" + t.Name()
			leaseCtx := func() context.Context {
				end := time.Now().Add(300 * time.Millisecond)
				return leasectx.With(t.Context(), func() time.Time { return end })
			}
			ctx := leaseCtx()
			err := v.WithTxAll(ctx, map[string]fence.Token{res: tok("b", 1, "h")}, func(tx *sql.Tx) error {
				time.Sleep(1500 * time.Millisecond) // idle in the transaction, past the lease
				_, err := tx.ExecContext(ctx, `SELECT 1`)
				return err
			})
			require.Error(t, err, "idle past the lease")
			requireHighest(t, v, res, 0, "")
			require.NoError(t, v.WithTxAll(t.Context(), map[string]fence.Token{res: tok("b", 2, "h")}, func(tx *sql.Tx) error {
				time.Sleep(1500 * time.Millisecond)
				_, err := tx.ExecContext(ctx, `SELECT 1`)
				return err
			}), "no lease, no bound")
			if tg.d != sqlverifier.Postgres {
				return
			}
			_, err = v.Exec(leaseCtx(), res, tok("b", 3, "h"), `SELECT pg_sleep(1)`)
			var pe *pgconn.PgError
			assert.True(t, errors.As(err, &pe) && pe.Code == "57014", "Exec: a statement past the lease: %v", err)
		})
	}
}
