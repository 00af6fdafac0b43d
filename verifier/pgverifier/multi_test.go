package pgverifier_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// transferAccounts creates two accounts of 100 and returns their ids.
func transferAccounts(t *testing.T, conn *pgx.Conn) (string, string) {
	t.Helper()
	_, err := conn.Exec(t.Context(), `CREATE TABLE IF NOT EXISTS multi_accounts (id text PRIMARY KEY, balance int NOT NULL)`)
	require.NoError(t, err)
	a, b := "acct/"+uuid.NewString(), "acct/"+uuid.NewString()
	_, err = conn.Exec(t.Context(), `INSERT INTO multi_accounts VALUES ($1, 100), ($2, 100)`, a, b)
	require.NoError(t, err)
	return a, b
}

func transfer(ctx context.Context, from, to string, amount int) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE multi_accounts SET balance = balance - $2 WHERE id = $1`, from, amount); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE multi_accounts SET balance = balance + $2 WHERE id = $1`, to, amount)
		return err
	}
}

func balances(t *testing.T, conn *pgx.Conn, a, b string) [2]int {
	t.Helper()
	var out [2]int
	for i, id := range []string{a, b} {
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT balance FROM multi_accounts WHERE id = $1`, id).Scan(&out[i]))
	}
	return out
}

func TestWithTxAllTransfer(t *testing.T) {
	ctx := t.Context()
	conn := connect(t, dsn)
	v, err := pgverifier.New(connect(t, dsn))
	require.NoError(t, err)
	a, b := transferAccounts(t, conn)
	tokA, tokB := fence.Token{Key: a, Seq: 5, Holder: "h"}, fence.Token{Key: b, Seq: 7, Holder: "h"}

	require.NoError(t, v.WithTxAll(ctx, map[string]fence.Token{a: tokA, b: tokB}, transfer(ctx, a, b, 10)))
	assert.Equal(t, [2]int{90, 110}, balances(t, conn, a, b))
	for r, want := range map[string]uint64{a: 5, b: 7} {
		seq, _, err := v.Highest(ctx, r)
		require.NoError(t, err)
		assert.Equal(t, want, seq, r)
	}

	// b's token is stale: nothing is written, a's high-water stays at 5.
	called := false
	err = v.WithTxAll(ctx, map[string]fence.Token{a: {Key: a, Seq: 6, Holder: "h"}, b: {Key: b, Seq: 6, Holder: "h"}},
		func(tx pgx.Tx) error { called = true; return nil })
	require.ErrorIs(t, err, verifier.ErrStale)
	var stale *verifier.StaleError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, b, stale.Resource)
	assert.Equal(t, uint64(7), stale.Highest)
	assert.False(t, called)
	seq, _, err := v.Highest(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), seq, "a's guard was rolled back")

	// A token of another lock for a: foreign.
	err = v.WithTxAll(ctx, map[string]fence.Token{a: {Key: "other", Seq: 9, Holder: "h"}, b: {Key: b, Seq: 9, Holder: "h"}}, transfer(ctx, a, b, 1))
	require.ErrorIs(t, err, verifier.ErrForeign)

	// fn's error rolls the guards and the writes back.
	boom := errors.New("boom")
	err = v.WithTxAll(ctx, map[string]fence.Token{a: {Key: a, Seq: 8, Holder: "h"}, b: {Key: b, Seq: 8, Holder: "h"}},
		func(tx pgx.Tx) error { _ = transfer(ctx, a, b, 50)(tx); return boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, [2]int{90, 110}, balances(t, conn, a, b))

	// GuardAll in the caller's transaction.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, v.GuardAll(ctx, tx, map[string]fence.Token{a: {Key: a, Seq: 8, Holder: "h"}, b: {Key: b, Seq: 8, Holder: "h"}}))
	require.NoError(t, transfer(ctx, b, a, 10)(tx))
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, [2]int{100, 100}, balances(t, conn, a, b))
	err = v.GuardAll(ctx, conn, map[string]fence.Token{a: {Key: a, Seq: 1, Holder: "h"}})
	assert.ErrorIs(t, err, verifier.ErrStale)

	// Bad input: nothing claimed.
	assert.ErrorIs(t, v.WithTxAll(ctx, nil, transfer(ctx, a, b, 1)), pgverifier.ErrInvalid)
	assert.ErrorIs(t, v.WithTxAll(ctx, map[string]fence.Token{a: {Key: a, Seq: 20, Holder: "h"}}, nil), pgverifier.ErrInvalid)
	assert.ErrorIs(t, v.GuardAll(ctx, nil, map[string]fence.Token{a: {Key: a, Seq: 20, Holder: "h"}}), pgverifier.ErrInvalid)
	assert.ErrorIs(t, v.WithTxAll(ctx, map[string]fence.Token{"": {Key: a, Seq: 20, Holder: "h"}}, transfer(ctx, a, b, 1)), verifier.ErrInvalidResource)
	seq, _, err = v.Highest(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, uint64(8), seq)
}

// TestWithTxAllNoDeadlock: goroutines guard the same two resources with
// ever newer tokens, holding the rows a moment: the guards go in one order,
// so PostgreSQL never finds a deadlock; the only refusals are stale tokens.
func TestWithTxAllNoDeadlock(t *testing.T) {
	ctx := t.Context()
	pool := newConnPool(t, dsn, 4)
	v, err := pgverifier.New(pool)
	require.NoError(t, err)
	a, b := "nodeadlock/"+uuid.NewString(), "nodeadlock/"+uuid.NewString()
	var seq atomic.Uint64
	var accepted, stale atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 40 {
				s := seq.Add(1)
				toks := map[string]fence.Token{a: {Key: "lock", Seq: s, Holder: "h"}, b: {Key: "lock", Seq: s, Holder: "h"}}
				err := v.WithTxAll(ctx, toks, func(pgx.Tx) error { time.Sleep(time.Millisecond); return nil })
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, verifier.ErrStale):
					stale.Add(1)
				default:
					t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("accepted %d, stale %d", accepted.Load(), stale.Load())
	assert.Equal(t, int64(160), accepted.Load()+stale.Load())
	sa, _, err := v.Highest(ctx, a)
	require.NoError(t, err)
	sb, _, err := v.Highest(ctx, b)
	require.NoError(t, err)
	assert.Equal(t, sa, sb, "both resources were always raised together")
}

// TestWithTxAllHooks: one verdict per resource; when one is refused, the
// other is reported as an error that names it, not as stale.
func TestWithTxAllHooks(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	got := map[string][]observe.Verdict{}
	h := &observe.Hooks{Verified: func(_ context.Context, e observe.Verified) {
		mu.Lock()
		defer mu.Unlock()
		got[e.Resource] = append(got[e.Resource], e.Verdict)
	}}
	v, err := pgverifier.New(connect(t, dsn), pgverifier.WithHooks(h))
	require.NoError(t, err)
	a, b := "hooksall/"+uuid.NewString(), "hooksall/"+uuid.NewString()
	tk := func(seq uint64) fence.Token { return fence.Token{Key: "k", Seq: seq, Holder: "h"} }
	require.NoError(t, v.WithTxAll(ctx, map[string]fence.Token{a: tk(3), b: tk(3)}, func(pgx.Tx) error { return nil }))
	require.ErrorIs(t, v.WithTxAll(ctx, map[string]fence.Token{a: tk(4), b: tk(2)}, func(pgx.Tx) error { return nil }), verifier.ErrStale)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []observe.Verdict{observe.Accepted, observe.Error}, got[a])
	assert.Equal(t, []observe.Verdict{observe.Accepted, observe.Stale}, got[b])
}

// TestWithTxAllGuardsInNameOrder: with the row of the second name locked by
// another transaction, WithTxAll holds the first name's row while it waits
// (it guards in name order), whatever the map's order; so two callers
// never hold one row each while waiting for the other's.
func TestWithTxAllGuardsInNameOrder(t *testing.T) {
	ctx := t.Context()
	v, err := pgverifier.New(newConnPool(t, dsn, 2))
	require.NoError(t, err)
	other := connect(t, dsn)
	for i := range 10 {
		p := "order/" + uuid.NewString()
		first, second := p+"/1", p+"/2"
		tk := func(seq uint64) fence.Token { return fence.Token{Key: "k", Seq: seq, Holder: "h"} }
		require.NoError(t, v.WithTxAll(ctx, map[string]fence.Token{first: tk(1), second: tk(1)}, func(pgx.Tx) error { return nil }))

		hold, err := other.Begin(ctx)
		require.NoError(t, err)
		_, err = hold.Exec(ctx, `SELECT 1 FROM fence_tokens WHERE resource = $1 FOR UPDATE`, second)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			done <- v.WithTxAll(ctx, map[string]fence.Token{second: tk(2), first: tk(2)}, func(pgx.Tx) error { return nil })
		}()
		// Once WithTxAll waits for the second row, it holds the first.
		require.Eventually(t, func() bool {
			_, err := hold.Exec(ctx, `SAVEPOINT probe`)
			require.NoError(t, err)
			_, err = hold.Exec(ctx, `SELECT 1 FROM fence_tokens WHERE resource = $1 FOR UPDATE NOWAIT`, first)
			_, rerr := hold.Exec(ctx, `ROLLBACK TO SAVEPOINT probe`)
			require.NoError(t, rerr)
			return err != nil
		}, 5*time.Second, 5*time.Millisecond, "round %d: the first row is not held while the second is awaited", i)
		require.NoError(t, hold.Rollback(ctx))
		require.NoError(t, <-done)
	}
}
