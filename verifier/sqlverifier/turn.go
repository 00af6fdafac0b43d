package sqlverifier

import (
	"context"
	"database/sql"
	"fmt"
)

// turn lets the verifier's calls take turns on a *sql.Conn. database/sql
// does not: a Conn's methods hold its session only while the driver runs
// one statement, not while rows are open or a transaction runs, so two
// goroutines interleave statements on one session, which drivers cannot
// take (pgx's stdlib indexed out of range, MySQL answered "busy buffer"
// and closed the connection). A call holds the turn from its first
// statement to its commit or rollback. A nil turn (a *sql.DB, a pool)
// lets every call through.
type turn chan struct{}

// newTurn returns the turn for db: one for a *sql.Conn, nil otherwise.
func newTurn(db DB) turn {
	if _, ok := db.(*sql.Conn); ok {
		return make(turn, 1)
	}
	return nil
}

// take waits for the turn until ctx ends, and returns the function that
// gives it back.
func (t turn) take(ctx context.Context) (release func(), err error) {
	if t == nil {
		return func() {}, nil
	}
	select {
	case t <- struct{}{}:
		return func() { <-t }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("sqlverifier: waiting for the turn on the verifier's *sql.Conn: %w", ctx.Err())
	}
}

// begin begins a transaction on the verifier's DB for a call that holds
// the turn, and returns the function that rolls it back unless it was
// committed. On a *sql.Conn the transaction's context is ctx without its
// cancellation, once the BEGIN is through: database/sql rolls back a
// transaction whose context ended in a goroutine of its own, and that
// ROLLBACK could reach the session after the turn passed, inside the next
// call's transaction. So a call whose ctx ends rolls back itself, before
// it gives the turn back. ctx still bounds the BEGIN and every statement,
// which run with ctx. (Only a ctx that ends during the BEGIN leaves the
// rollback to database/sql.)
func (v *Verifier) begin(ctx context.Context) (*sql.Tx, func(), error) {
	if v.turn == nil {
		tx, err := v.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlverifier: begin: %w", err)
		}
		return tx, func() { _ = tx.Rollback() }, nil
	}
	txCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	during := context.AfterFunc(ctx, stop)
	tx, err := v.db.BeginTx(txCtx, nil)
	if !during() && err == nil {
		err = ctx.Err()
		_ = tx.Rollback()
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("sqlverifier: begin: %w", err)
	}
	// After a commit the rollback is a no-op (sql.ErrTxDone); stop comes
	// after it, so database/sql's own rollback never runs.
	return tx, func() { _ = tx.Rollback(); stop() }, nil
}
