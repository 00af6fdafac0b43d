package pgverifier_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// TestPostgresRestart crashes PostgreSQL (immediate shutdown, then crash
// recovery) while a current holder claims ever newer tokens and a stale
// holder keeps trying to write with an old one. While the server is down
// every call fails with an error; no stale write is ever accepted, and no
// accepted token is forgotten after the restart.
func TestPostgresRestart(t *testing.T) {
	ctx := t.Context()
	pg := testenv.NewPostgres(t)
	require.NoError(t, applyMigrations(ctx, pg.DSN()))
	// testenv runs PostgreSQL with synchronous_commit=off for speed; a
	// verifier needs its commits durable, or a crash could forget an
	// accepted token.
	dsn := pg.DSN() + "&synchronous_commit=on"
	setup := connect(t, dsn)
	var syncCommit string
	require.NoError(t, setup.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&syncCommit))
	require.Equal(t, "on", syncCommit)
	_, err := setup.Exec(ctx, `CREATE TABLE stale_writes (holder text)`)
	require.NoError(t, err)
	setup.Close(ctx)

	v, err := pgverifier.New(newConnPool(t, dsn, 4))
	require.NoError(t, err)
	const res = "restart"
	require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(1, "old")))
	require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(2, "new")), "from here on, token 1 is stale")

	var (
		stop       = make(chan struct{})
		wg         sync.WaitGroup
		maxOK      atomic.Uint64 // highest token the current holder got accepted
		okCount    atomic.Int64
		downErrs   atomic.Int64 // errors that are not rejections
		staleOK    atomic.Int64 // stale writes accepted: must stay 0
		staleTries atomic.Int64
		mu         sync.Mutex
		unexpected []error
	)
	wg.Go(func() { // the current holder
		for seq := uint64(3); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err := v.Claim(cctx, res, verifiertest.Tok(seq, "new"))
			cancel()
			switch {
			case err == nil:
				maxOK.Store(seq)
				okCount.Add(1)
			case errors.Is(err, verifier.ErrStale):
				mu.Lock()
				unexpected = append(unexpected, err) // its tokens only grow
				mu.Unlock()
			default:
				downErrs.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	wg.Go(func() { // the holder that paused and still has token 1
		for {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err := v.WithTx(cctx, res, verifiertest.Tok(1, "old"), func(tx pgx.Tx) error {
				_, err := tx.Exec(cctx, `INSERT INTO stale_writes VALUES ('old')`)
				return err
			})
			cancel()
			staleTries.Add(1)
			if err == nil {
				staleOK.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("claims before the crash", func() bool { return okCount.Load() >= 20 })
	require.NoError(t, pg.Kill())
	beforeCrash := maxOK.Load()
	okAtCrash := okCount.Load()
	errsAtCrash := downErrs.Load()
	waitFor("errors while down", func() bool { return downErrs.Load() >= errsAtCrash+5 })
	assert.LessOrEqual(t, okCount.Load()-okAtCrash, int64(1), "at most a claim in flight at the crash succeeded")

	require.NoError(t, pg.Start(ctx))
	waitFor("claims after the restart", func() bool { return okCount.Load() >= okAtCrash+20 })
	close(stop)
	wg.Wait()

	require.Empty(t, unexpected)
	assert.Zero(t, staleOK.Load(), "a stale write was accepted")
	assert.Positive(t, staleTries.Load())
	t.Logf("%d claims accepted (%d before the crash, highest %d), %d failed while down, %d stale writes tried",
		okCount.Load(), okAtCrash, beforeCrash, downErrs.Load(), staleTries.Load())

	check := connect(t, dsn)
	var n int
	require.NoError(t, check.QueryRow(ctx, `SELECT count(*) FROM stale_writes`).Scan(&n))
	assert.Zero(t, n, "no stale write reached the table")
	seq, holder, err := v.Highest(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, maxOK.Load(), seq, "the last accepted token survived the crash")
	assert.Equal(t, "new", holder)
	verifiertest.RequireStale(t, v.Claim(ctx, res, verifiertest.Tok(beforeCrash, "new")), verifiertest.Tok(beforeCrash, "new"), seq, "new")
}
