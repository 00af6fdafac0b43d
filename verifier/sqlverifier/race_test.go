package sqlverifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// raceSetup gives two holders, A (token 1) and B (token 2), each with its own
// connection and verifier, and an account at 100 guarded by resource res.
// A adds 10 and B adds 20: a correct outcome is 130, or 120 with A told
// that its write failed.
type raceSetup struct {
	tg           target
	res, account string
	connA, connB *sql.Conn
	vA, vB       *sqlverifier.Verifier
	tokA, tokB   fence.Token
}

func newRace(t *testing.T, tg target) *raceSetup {
	t.Helper()
	ctx := t.Context()
	s := &raceSetup{
		tg:      tg,
		res:     verifiertest.Resource(t, "acct"),
		account: verifiertest.Resource(t, "id"),
		connA:   tg.conn(t),
		connB:   tg.conn(t),
		tokA:    verifiertest.Tok(1, "a"),
		tokB:    verifiertest.Tok(2, "b"),
	}
	ddl := `CREATE TABLE IF NOT EXISTS accounts (id VARBINARY(1024) PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`
	if tg.d == sqlverifier.Postgres {
		ddl = `CREATE TABLE IF NOT EXISTS accounts (id text PRIMARY KEY, balance bigint NOT NULL)`
	}
	_, err := s.connA.ExecContext(ctx, ddl)
	require.NoError(t, err)
	_, err = s.connA.ExecContext(ctx, tg.q(`INSERT INTO accounts VALUES (?, 100)`), s.account)
	require.NoError(t, err)
	s.vA, s.vB = tg.verifier(t, s.connA), tg.verifier(t, s.connB)
	return s
}

// read reads the balance in the test's goroutine.
func (s *raceSetup) read(t *testing.T, q sqlverifier.Querier) int64 {
	t.Helper()
	bal, err := s.balance(t.Context(), q)
	require.NoError(t, err)
	return bal
}

// balance reads the balance; for fn of WithTx, which may run in another
// goroutine.
func (s *raceSetup) balance(ctx context.Context, q sqlverifier.Querier) (int64, error) {
	var bal int64
	err := q.QueryRowContext(ctx, s.tg.q(`SELECT balance FROM accounts WHERE id = ?`), s.account).Scan(&bal)
	return bal, err
}

// addTo is a read-modify-write in tx that adds n to the balance.
func (s *raceSetup) addTo(ctx context.Context, tx *sql.Tx, n int64) error {
	bal, err := s.balance(ctx, tx)
	if err != nil {
		return err
	}
	return s.write(ctx, tx, bal+n)
}

func (s *raceSetup) write(ctx context.Context, tx *sql.Tx, bal int64) error {
	_, err := tx.ExecContext(ctx, s.tg.q(`UPDATE accounts SET balance = ? WHERE id = ?`), bal, s.account)
	return err
}

// TestReadModifyWriteRace plays Kleppmann's read-modify-write race (A reads
// and pauses; B gets the lock, reads and writes; A wakes and writes) with
// three ways of fencing, on every target.
func TestReadModifyWriteRace(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		// Checking the token only at write time loses A's update: both writes
		// carry tokens that are the newest the resource has seen when they
		// arrive, so both pass, and B's, computed from the balance before A's
		// write, overwrites it.
		t.Run("write-only check loses an update", func(t *testing.T) {
			ctx := t.Context()
			s := newRace(t, tg)
			balA := s.read(t, s.connA) // A reads, then pauses
			balB := s.read(t, s.connB) // B reads (it has not checked its token yet)
			require.NoError(t, s.vA.WithTx(ctx, s.res, s.tokA, func(tx *sql.Tx) error { return s.write(ctx, tx, balA+10) }))
			require.NoError(t, s.vB.WithTx(ctx, s.res, s.tokB, func(tx *sql.Tx) error { return s.write(ctx, tx, balB+20) }))
			assert.Equal(t, int64(120), s.read(t, s.connA), "both writes were accepted and A's +10 is gone")
		})

		// Guard first, in the transaction that reads and writes: B's guard
		// waits for A's transaction, then B reads A's result.
		t.Run("guard first in one transaction", func(t *testing.T) {
			ctx := t.Context()
			s := newRace(t, tg)
			aRead, aGo := make(chan struct{}), make(chan struct{})
			aDone := make(chan error, 1)
			go func() {
				aDone <- s.vA.WithTx(ctx, s.res, s.tokA, func(tx *sql.Tx) error {
					bal, err := s.balance(ctx, tx)
					close(aRead)
					if err != nil {
						return err
					}
					<-aGo // A pauses holding its transaction
					return s.write(ctx, tx, bal+10)
				})
			}()
			<-aRead
			bIn := make(chan struct{})
			bDone := make(chan error, 1)
			go func() {
				bDone <- s.vB.WithTx(ctx, s.res, s.tokB, func(tx *sql.Tx) error {
					close(bIn)
					return s.addTo(ctx, tx, 20)
				})
			}()
			select {
			case <-bIn:
				t.Fatal("B got past its guard while A's transaction held the high-water row")
			case err := <-bDone:
				t.Fatalf("B finished while A was paused: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			close(aGo)
			require.NoError(t, <-aDone)
			require.NoError(t, <-bDone)
			assert.Equal(t, int64(130), s.read(t, s.connA), "no update lost")
		})

		// If A pauses for long, its open transaction would hold B up; a
		// session timeout ends A's transaction, B proceeds, and A's write
		// fails loudly.
		t.Run("guard first, paused transaction timed out", func(t *testing.T) {
			ctx := t.Context()
			s := newRace(t, tg)
			timeout := `SET SESSION idle_transaction_timeout = 1` // MariaDB, seconds
			if tg.d == sqlverifier.Postgres {
				timeout = `SET idle_in_transaction_session_timeout = '300ms'`
			}
			_, err := s.connA.ExecContext(ctx, timeout)
			require.NoError(t, err)
			aRead, aGo := make(chan struct{}), make(chan struct{})
			aDone := make(chan error, 1)
			go func() {
				aDone <- s.vA.WithTx(ctx, s.res, s.tokA, func(tx *sql.Tx) error {
					bal, err := s.balance(ctx, tx)
					close(aRead)
					if err != nil {
						return err
					}
					<-aGo
					return s.write(ctx, tx, bal+10)
				})
			}()
			<-aRead
			require.NoError(t, s.vB.WithTx(ctx, s.res, s.tokB, func(tx *sql.Tx) error {
				return s.addTo(ctx, tx, 20)
			}), "B waits for the server to end A's idle transaction")
			close(aGo)
			require.Error(t, <-aDone, "A learns that its write did not happen")
			assert.Equal(t, int64(120), s.read(t, s.connB))
			requireHighest(t, s.vB, s.res, 2, "b")
		})

		// Claim before read in a statement of its own, and fence the write
		// again: A's write is refused because B claimed in between.
		t.Run("claim before read, fenced write", func(t *testing.T) {
			ctx := t.Context()
			s := newRace(t, tg)
			require.NoError(t, s.vA.Claim(ctx, s.res, s.tokA))
			balA := s.read(t, s.connA)
			require.NoError(t, s.vB.Claim(ctx, s.res, s.tokB))
			balB := s.read(t, s.connB)
			err := s.vA.WithTx(ctx, s.res, s.tokA, func(tx *sql.Tx) error { return s.write(ctx, tx, balA+10) })
			verifiertest.RequireStale(t, err, s.tokA, 2, "b")
			require.NoError(t, s.vB.WithTx(ctx, s.res, s.tokB, func(tx *sql.Tx) error { return s.write(ctx, tx, balB+20) }))
			assert.Equal(t, int64(120), s.read(t, s.connA), "only B's write landed; A got an error, not a silent loss")
		})
	})
}

// TestFirstInsertContention: 32 writers hit resources that have no row yet,
// all at once, some of them rolling back after the guard. The row's first
// insert must neither deadlock (no gap locks: the guard is an INSERT, and
// its read finds the row) nor let two tokens of one Seq in.
func TestFirstInsertContention(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		db.SetMaxOpenConns(32)
		v := tg.verifier(t, db)
		var mu sync.Mutex
		var errs []error
		for round := range 8 {
			res := verifiertest.Resource(t, fmt.Sprint(round))
			var wg sync.WaitGroup
			for w := range 32 {
				wg.Go(func() {
					tk := verifiertest.Tok(uint64(1+w%4), fmt.Sprint("h", w))
					rollback := errors.New("rolled back on purpose")
					err := v.WithTx(ctx, res, tk, func(*sql.Tx) error {
						if w%3 == 0 {
							return rollback
						}
						return nil
					})
					if err != nil && !errors.Is(err, rollback) && !errors.Is(err, verifier.ErrStale) {
						mu.Lock()
						errs = append(errs, fmt.Errorf("writer %d: %w", w, err))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			seq, holder, err := v.Highest(ctx, res)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), seq, "round %d: a writer with seq 4 commits", round)
			assert.NotEmpty(t, holder)
		}
		assert.Empty(t, errs)
	})
}
