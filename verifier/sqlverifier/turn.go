package sqlverifier

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock/internal/leasectx"
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
// committed, and then ends its bound.
//
// On a *sql.Conn the transaction's context is ctx without its
// cancellation, once the BEGIN is through: database/sql rolls back a
// transaction whose context ended in a goroutine of its own, and that
// ROLLBACK could reach the session after the turn passed, inside the next
// call's transaction. So a call whose ctx ends rolls back itself, before
// it gives the turn back. ctx still bounds the BEGIN and every statement,
// which run with ctx. (Only a ctx that ends during the BEGIN leaves the
// rollback to database/sql.)
//
// When ctx carries a lease's deadline or has its own (see [leasectx.Bound]),
// the server ends the transaction when it idles past what is left of it
// (PostgreSQL: or runs one statement that long), so that a holder frozen
// inside it cannot keep the resource's row locked after its lease: on
// PostgreSQL by settings local to the transaction; on MySQL by the
// session's wait_timeout, on a connection taken from the pool for the call
// (or the verifier's *sql.Conn) and given back its value after.
func (v *Verifier) begin(ctx context.Context) (*sql.Tx, func(), error) {
	if _, ok := leasectx.Bound(ctx); !ok {
		return v.beginOn(ctx, v.db)
	}
	if !v.f.rowFirst { // PostgreSQL
		tx, rollback, err := v.beginOn(ctx, v.db)
		if err != nil {
			return nil, nil, err
		}
		bound, _ := leasectx.Bound(ctx)                     // what is left once the pool lent a connection
		ms := (bound + time.Millisecond - 1).Milliseconds() // rounded up: 0 would mean no bound
		if _, err := tx.ExecContext(ctx, v.sql.bound, strconv.FormatInt(ms, 10)); err != nil {
			rollback()
			return nil, nil, fmt.Errorf("sqlverifier: begin: bounding the transaction: %w", err)
		}
		return tx, rollback, nil
	}
	conn, mine, err := v.session(ctx)
	if err != nil || conn == nil {
		if err != nil {
			return nil, nil, err
		}
		return v.beginOn(ctx, v.db) // a DB that cannot lend a session: no bound
	}
	bound, _ := leasectx.Bound(ctx)                        // what is left once the pool lent a connection
	secs := int64((bound + time.Second - 1) / time.Second) // rounded up: wait_timeout counts seconds
	_, err = conn.ExecContext(ctx, strings.Replace(v.sql.bound, "{{seconds}}", strconv.FormatInt(secs, 10), 1))
	var tx *sql.Tx
	rollback := func() {}
	if err == nil {
		tx, rollback, err = v.beginOn(ctx, conn)
	} else {
		err = fmt.Errorf("sqlverifier: begin: bounding the session: %w", err)
	}
	end := func() {
		rollback()
		// The reset runs even when ctx ended (a connection of the pool is
		// then closed rather than given back with the bound), within its
		// own short budget.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resetBudget)
		_, rerr := conn.ExecContext(rctx, v.sql.unbound)
		cancel()
		if mine {
			if rerr != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
			}
			_ = conn.Close()
		}
	}
	if err != nil {
		end()
		return nil, nil, err
	}
	return tx, end, nil
}

// resetBudget bounds the statement that gives a session back its
// wait_timeout after a bounded transaction on MySQL.
const resetBudget = time.Second

// session returns the connection a bounded transaction runs on, on MySQL:
// the verifier's *sql.Conn, or one taken from its *sql.DB (mine: the
// caller closes it); nil for another DB.
func (v *Verifier) session(ctx context.Context) (conn *sql.Conn, mine bool, err error) {
	switch db := v.db.(type) {
	case *sql.Conn:
		return db, false, nil
	case *sql.DB:
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("sqlverifier: begin: %w", err)
		}
		return conn, true, nil
	}
	return nil, false, nil
}

// beginOn begins the transaction on db (the verifier's DB, or a session
// taken from it), as begin describes.
func (v *Verifier) beginOn(ctx context.Context, db DB) (*sql.Tx, func(), error) {
	if v.turn == nil {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlverifier: begin: %w", err)
		}
		return tx, func() { _ = tx.Rollback() }, nil
	}
	txCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	during := context.AfterFunc(ctx, stop)
	tx, err := db.BeginTx(txCtx, nil)
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
