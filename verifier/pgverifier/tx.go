package pgverifier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/leasectx"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

// WithTx fences a read-modify-write: it begins a transaction on the
// verifier's DB, runs the guard for tok on resource first, then fn with the
// transaction, and commits.
//
// Because the guard comes first, the transaction holds the resource's
// high-water row from before fn reads anything until it commits: a holder
// with an older token waits and is then rejected, and a holder with a newer
// token waits and then reads what fn wrote. No update is lost, whatever
// pauses either holder takes.
//
// When tok is rejected, fn is not called and WithTx returns a
// *verifier.StaleError (or a *verifier.ForeignError). When fn returns an error (or panics), the
// transaction rolls back, the high-water stays where it was, and WithTx
// returns fn's error. A failed commit is returned as is: the write and the
// raised high-water are then both in or both out, never one without the
// other. A nil fn returns an error wrapping [ErrInvalid], and nothing is
// claimed.
//
// Pass the lease's context (lease.Lease.Context): the database then ends
// the transaction if it outlives the lease (see "A paused holder" in the
// package documentation).
func (v *Verifier) WithTx(ctx context.Context, resource string, tok fence.Token, fn func(tx pgx.Tx) error) error {
	return kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		if fn == nil {
			return invalid("WithTx: nil function")
		}
		tx, err := v.begin(ctx)
		if err != nil {
			return err
		}
		// After a commit this is a no-op (pgx.ErrTxClosed). On a broken
		// connection it fails too, and the server rolls back by itself.
		defer tx.Rollback(context.WithoutCancel(ctx))
		if err := v.guard(ctx, tx, c); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return kind.CommitFailed(ctx, strconv.Quote(resource), err)
		}
		return nil
	})
}

// Exec fences one statement: in a transaction on the verifier's DB it sends
// the guard for tok and then sql in a single round trip, and commits if the
// token was accepted. It costs the same round trips as sql alone in a
// transaction (begin, statement, commit), so it suits writes that need no
// read in Go first, such as
//
//	UPDATE accounts SET balance = balance + $2 WHERE id = $1
//
// The server runs the guard before sql, so sql reads and writes only after
// the resource's high-water row is locked (claim before read). When tok is
// refused, sql's effects are rolled back and Exec returns a
// *verifier.StaleError or *verifier.ForeignError; when sql fails, the
// high-water stays where it was and the error (prefixed "pgverifier:
// exec:", never "guard") wraps the server's *pgconn.PgError.
func (v *Verifier) Exec(ctx context.Context, resource string, tok fence.Token, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		tag, err = v.exec(ctx, c, sql, args)
		return err
	})
	return tag, err
}

// exec is Exec once its arguments are known to be valid.
func (v *Verifier) exec(ctx context.Context, c scaffold.Claim, sql string, args []any) (pgconn.CommandTag, error) {
	tx, err := v.begin(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	b := &pgx.Batch{}
	b.Queue(v.guardSQL, scaffold.GuardArgs(c)...)
	b.Queue(sql, args...)
	br := tx.SendBatch(ctx, b)
	var seq int64
	guardErr := br.QueryRow().Scan(&seq)
	tag, execErr := br.Exec()
	closeErr := br.Close()
	switch {
	case errors.Is(guardErr, pgx.ErrNoRows):
		// The guard's row lock is held until the rollback: read the reason
		// in the transaction when it is still usable, else after it.
		var row scaffold.Row
		var readErr error
		inTx := execErr == nil && closeErr == nil
		if inTx {
			row, readErr = v.highest(ctx, tx, c.Resource())
		}
		if err := tx.Rollback(ctx); err != nil {
			return pgconn.CommandTag{}, fmt.Errorf("pgverifier: rollback after a refused token: %w", err)
		}
		if !inTx {
			row, readErr = v.highest(ctx, v.db, c.Resource())
		}
		if readErr != nil {
			return pgconn.CommandTag{}, fmt.Errorf("pgverifier: guard %q refused %v, and reading the high-water failed: %w", c.Resource(), c.Token(), readErr)
		}
		return pgconn.CommandTag{}, kind.Refused(c, row)
	case guardErr != nil:
		// pgx prepares every statement of a batch before it runs the first,
		// so an error in sql (a typo, a missing column, arguments that do
		// not fit) arrives as the guard's; pgx names the statement.
		var pe pgx.ErrPreprocessingBatch
		if errors.As(guardErr, &pe) && pe.SQL() != v.guardSQL {
			return pgconn.CommandTag{}, fmt.Errorf("pgverifier: exec: %w", guardErr)
		}
		return pgconn.CommandTag{}, fmt.Errorf("pgverifier: guard %q: %w", c.Resource(), v.noTable.Explain(guardErr))
	case execErr != nil:
		return pgconn.CommandTag{}, fmt.Errorf("pgverifier: exec: %w", execErr)
	case closeErr != nil:
		return pgconn.CommandTag{}, closeErr
	}
	if err := tx.Commit(ctx); err != nil {
		return pgconn.CommandTag{}, kind.CommitFailed(ctx, strconv.Quote(c.Resource()), err)
	}
	return tag, nil
}

// txBeginner begins a transaction with options: *pgxpool.Pool and
// *pgx.Conn are; a pgx.Tx (a savepoint) is not.
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// boundedBegin begins a transaction that the server ends after %d ms
// idle in it (closing the session) or in one statement. It is sent as one
// simple query, so the bound costs no round trip.
const boundedBegin = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = %[1]d; SET LOCAL statement_timeout = %[1]d"

// begin begins the transaction of WithTx, WithTxAll and Exec on v's DB.
// When ctx carries a lease's deadline (the lease's Context, or a context
// derived from it) or has a deadline of its own, the server ends the
// transaction when it idles or runs one statement past what is left of
// it: a holder frozen inside it cannot keep the resource's row locked
// after its lease. A DB without BeginTx (a pgx.Tx) is not bounded.
func (v *Verifier) begin(ctx context.Context) (pgx.Tx, error) {
	var tx pgx.Tx
	var err error
	bound, ok := leasectx.Bound(ctx)
	if b, can := v.db.(txBeginner); ok && can {
		ms := (bound + time.Millisecond - 1).Milliseconds() // rounded up: 0 would mean no bound
		tx, err = b.BeginTx(ctx, pgx.TxOptions{BeginQuery: fmt.Sprintf(boundedBegin, ms)})
	} else {
		tx, err = v.db.Begin(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("pgverifier: begin: %w", err)
	}
	return tx, nil
}
