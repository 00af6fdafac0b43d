package sqlverifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// TestConnTakesTurns: many goroutines share one Verifier on one *sql.Conn,
// as the Verifier's doc allows ("on a *sql.Conn, calls take turns on its
// one session"). Every call must work as it would alone: no driver panic
// (pgx's stdlib Rows.Next indexed out of range when a second statement ran
// while the first one's rows were open), no broken session ("conn busy",
// "bad connection"), and every fenced write applied exactly once.
func TestConnTakesTurns(t *testing.T) {
	const goroutines, rounds = 12, 25
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		counts := tg.ident("turns_" + tg.name)
		_, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+counts)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `CREATE TABLE `+counts+` (id VARCHAR(200) PRIMARY KEY, n BIGINT NOT NULL)`)
		require.NoError(t, err)

		c := tg.conn(t)
		v := tg.verifier(t, c)
		t.Cleanup(func() { v.Close() })
		shared := verifiertest.Resource(t, "shared")
		names := make([]string, goroutines)
		for g := range names {
			names[g] = verifiertest.Resource(t, "own-"+strconv.Itoa(g))
			_, err := db.ExecContext(ctx, tg.q(`INSERT INTO `+counts+` VALUES (?, 0)`), names[g])
			require.NoError(t, err)
		}
		own := func(g int) string { return names[g] }

		errs := make(chan error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				errs <- func() error {
					res := own(g)
					for r := range rounds {
						holder := "h" + strconv.Itoa(g)
						seq := uint64(2*r + 1)
						// A read-modify-write that keeps rows open inside
						// the transaction while it reads.
						err := v.WithTx(ctx, res, verifiertest.Tok(seq, holder), func(tx *sql.Tx) error {
							rows, err := tx.QueryContext(ctx, tg.q(`SELECT n FROM `+counts+` WHERE id = ?`), res)
							if err != nil {
								return err
							}
							var n int64
							for rows.Next() {
								if err := rows.Scan(&n); err != nil {
									rows.Close()
									return err
								}
							}
							if err := rows.Close(); err != nil {
								return err
							}
							_, err = tx.ExecContext(ctx, tg.q(`UPDATE `+counts+` SET n = ? WHERE id = ?`), n+1, res)
							return err
						})
						if err != nil {
							return fmt.Errorf("WithTx %d: %w", r, err)
						}
						if _, err := v.Exec(ctx, res, verifiertest.Tok(seq+1, holder),
							tg.q(`UPDATE `+counts+` SET n = n + 1 WHERE id = ?`), res); err != nil {
							return fmt.Errorf("Exec %d: %w", r, err)
						}
						if got, who, err := v.Highest(ctx, res); err != nil || got != seq+1 || who != holder {
							return fmt.Errorf("Highest %d: %d %q %v, want %d %q", r, got, who, err, seq+1, holder)
						}
						// The shared resource sees tokens out of order:
						// refusals are expected, other errors are not.
						err = v.Claim(ctx, shared, verifiertest.Tok(uint64(r*goroutines+g+1), holder))
						if err != nil && !errors.Is(err, verifier.ErrStale) {
							return fmt.Errorf("Claim %d: %w", r, err)
						}
						err = v.Guard(ctx, c, shared, verifiertest.Tok(uint64(r*goroutines+g+1), holder))
						if err != nil && !errors.Is(err, verifier.ErrStale) {
							return fmt.Errorf("Guard %d: %w", r, err)
						}
					}
					return nil
				}()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NoError(t, err)
		}

		for g := range goroutines {
			var n int64
			require.NoError(t, db.QueryRowContext(ctx, tg.q(`SELECT n FROM `+counts+` WHERE id = ?`), own(g)).Scan(&n))
			assert.Equal(t, int64(2*rounds), n, "fenced writes of goroutine %d, each applied once", g)
		}
		requireHighest(t, v, shared, uint64(rounds*goroutines), "h"+strconv.Itoa(goroutines-1))
		require.NoError(t, c.PingContext(ctx), "the session is still usable")
	})
}

// TestConnCancelInTurn: a WithTx whose context ends inside fn, while
// other calls wait for their turn on the same *sql.Conn, rolls back its
// own transaction before the next call begins: its write is gone, the
// waiting calls succeed, and the session stays usable.
func TestConnCancelInTurn(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		counts := tg.ident("cancel_" + tg.name)
		_, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+counts)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `CREATE TABLE `+counts+` (id VARCHAR(200) PRIMARY KEY, n BIGINT NOT NULL)`)
		require.NoError(t, err)
		res := verifiertest.Resource(t, "r")
		_, err = db.ExecContext(ctx, tg.q(`INSERT INTO `+counts+` VALUES (?, 0)`), res)
		require.NoError(t, err)

		c := tg.conn(t)
		v := tg.verifier(t, c)
		inFn := make(chan struct{})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- v.WithTx(cctx, res, verifiertest.Tok(1, "a"), func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, tg.q(`UPDATE `+counts+` SET n = 100 WHERE id = ?`), res); err != nil {
					return err
				}
				close(inFn)
				<-cctx.Done()
				return cctx.Err()
			})
		}()
		<-inFn
		waiting := make(chan error, 1)
		go func() {
			_, err := v.Exec(ctx, res, verifiertest.Tok(2, "b"), tg.q(`UPDATE `+counts+` SET n = n + 1 WHERE id = ?`), res)
			waiting <- err
		}()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.NoError(t, <-waiting, "the waiting call runs once the cancelled one rolled back")

		var n int64
		require.NoError(t, db.QueryRowContext(ctx, tg.q(`SELECT n FROM `+counts+` WHERE id = ?`), res).Scan(&n))
		assert.Equal(t, int64(1), n, "the cancelled write rolled back; the next one landed")
		requireHighest(t, v, res, 2, "b")
		require.NoError(t, v.Claim(ctx, res, verifiertest.Tok(3, "c")), "the session is still usable")
	})
}
