package pgverifier_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/verifier/internal/pausetest"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// pausedTable records who wrote under the lock.
const pausedTable = "paused_writes"

// holdPG is the frozen holder: WithTx with its lease's context, a write,
// then the pause.
func holdPG(ctx context.Context, dsn, resource string, tok fence.Token, inside func()) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	v, err := pgverifier.New(conn)
	if err != nil {
		return err
	}
	return v.WithTx(ctx, resource, tok, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+pausedTable+` (resource, who) VALUES ($1, 'paused')`, resource); err != nil {
			return err
		}
		inside()
		return nil
	})
}

// TestPausedHolderDoesNotHoldTheRow: a holder frozen (SIGSTOP) inside
// WithTx, its lease's context passed, holds the resource's row only until
// its lease ends: the server then closes its session. The next holder
// writes while it is still frozen, and its commit fails when it resumes.
// Without the bound, the next holder waits for the frozen one to resume.
func TestPausedHolderDoesNotHoldTheRow(t *testing.T) {
	ctx := t.Context()
	r := testenv.NewRedis(t)
	conn := connect(t, dsn)
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pausedTable+` (resource text NOT NULL, who text NOT NULL)`)
	require.NoError(t, err)
	name := "paused/" + t.Name()
	const ttl = 2 * time.Second
	v, err := pgverifier.New(conn)
	require.NoError(t, err)
	out := pausetest.Run(t, r.Addr(), dsn, name, ttl, func(ctx context.Context, tok fence.Token) error {
		return v.WithTx(ctx, name, tok, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+pausedTable+` (resource, who) VALUES ($1, 'next')`, name)
			return err
		})
	})
	t.Logf("the next holder wrote %v after the freeze (ttl %v); the frozen holder, resumed: %s", out.Took.Round(time.Millisecond), ttl, out.HolderErr)
	require.NoError(t, out.NextErr, "the next holder")
	assert.True(t, out.StoppedAfter, "the next holder wrote while the other was frozen")
	assert.NotEmpty(t, out.HolderErr, "the frozen holder's commit failed")

	var who []string
	rows, err := conn.Query(ctx, `SELECT who FROM `+pausedTable+` WHERE resource = $1`, name)
	require.NoError(t, err)
	who, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"next"}, who, "only the next holder's write is in")
	seq, holder, err := v.Highest(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, out.Next.Seq, seq)
	assert.Equal(t, out.Next.Holder, holder)
}
