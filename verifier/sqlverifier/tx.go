package sqlverifier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

// WithTx fences a read-modify-write: it begins a transaction on the
// verifier's DB, runs the guard for tok on resource first, then fn with the
// transaction, and commits.
//
// Because the guard comes first, the transaction holds the resource's
// high-water row from before fn reads anything until it commits: a holder
// with an older token waits and is then refused, and a holder with a newer
// token waits and then reads what fn wrote. No update is lost, whatever
// pauses either holder takes. (On MySQL's default REPEATABLE READ, fn's
// plain SELECTs read a snapshot taken at its first read, which is after the
// guard: still after the previous holder's commit.)
//
// When tok is refused, fn is not called and WithTx returns a
// *verifier.StaleError or *verifier.ForeignError. When fn returns an error
// (or panics), the transaction rolls back, the high-water stays where it
// was, and WithTx returns fn's error as it is. A failed commit is returned
// wrapped: the write and the raised high-water are then both in or both
// out, never one without the other. A nil fn returns an error wrapping
// [ErrInvalid], and nothing is claimed.
//
// Pass the lease's context (lease.Lease.Context): the database then ends
// the transaction if it outlives the lease (see "A paused holder" in the
// package documentation).
func (v *Verifier) WithTx(ctx context.Context, resource string, tok fence.Token, fn func(tx *sql.Tx) error) error {
	return kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		if fn == nil {
			return invalid("WithTx: nil function")
		}
		return v.inTx(ctx, []scaffold.Claim{c}, fn)
	})
}

// inTx begins, guards each claim in order, runs fn (if not nil) and
// commits, in one turn on a *sql.Conn.
func (v *Verifier) inTx(ctx context.Context, cs []scaffold.Claim, fn func(tx *sql.Tx) error) error {
	resource := strconv.Quote(cs[0].Resource())
	if len(cs) > 1 {
		resource = fmt.Sprintf("%d resources", len(cs))
	}
	release, err := v.turn.take(ctx)
	if err != nil {
		return err
	}
	defer release()
	for _, c := range cs {
		if err := v.ensureRow(ctx, c.Resource()); err != nil {
			return err
		}
	}
	v.fast.prepare(ctx) // before the transaction holds a connection
	tx, rollback, err := v.begin(ctx)
	if err != nil {
		return err
	}
	defer rollback() // a no-op after the commit
	for _, c := range cs {
		if err := v.guard(ctx, tx, c, true); err != nil {
			return err
		}
	}
	if fn != nil {
		if err := fn(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return kind.CommitFailed(ctx, resource, err)
	}
	return nil
}

// Exec fences one statement: in a transaction on the verifier's DB it runs
// the guard for tok, then query with args, and commits. It suits writes
// that need no read in Go first, such as
//
//	UPDATE accounts SET balance = balance + ? WHERE id = ?
//
// query runs only after the resource's high-water row is locked (claim
// before read). When tok is refused, query is not run and Exec returns a
// *verifier.StaleError or *verifier.ForeignError. When query fails, the
// transaction rolls back, the high-water stays where it was, and the error
// is the statement's, "sqlverifier: exec: " and the driver's error (so
// errors.As with *mysql.MySQLError or *pgconn.PgError works), never a
// guard error.
//
// It costs one round trip more than query alone in a transaction (begin,
// query, commit): database/sql cannot send two statements at once. Where
// the data is one row per resource, the per-row pattern of the package
// documentation costs none.
func (v *Verifier) Exec(ctx context.Context, resource string, tok fence.Token, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		return v.inTx(ctx, []scaffold.Claim{c}, func(tx *sql.Tx) error {
			var err error
			if res, err = tx.ExecContext(ctx, query, args...); err != nil {
				return fmt.Errorf("sqlverifier: exec: %w", err)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Move binds resource to the lock to and forgets its high-water, provided
// it is bound to from or to no lock yet (no row, or a row written before
// the lock binding); see [verifier.Mover]. Otherwise it returns a
// *verifier.ForeignError whose Lock is the current binding (also when that
// is to already: a repeated Move is refused, not ignored), and changes
// nothing. Invalid arguments return an error wrapping [ErrInvalid] (or
// verifier.ErrInvalidResource for the resource name), before any I/O.
//
// It is one transaction that locks the row (inserting it if missing; on
// MySQL just before, committed on its own), reads its binding and rewrites
// it. Stop the old lock's users first.
func (v *Verifier) Move(ctx context.Context, resource, from, to string) error {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return err
	}
	if err := verifier.ValidateMove(resource, from, to); err != nil {
		if errors.Is(err, verifier.ErrInvalid) {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return err
	}
	// The row must exist, so that the locking read below locks it. On
	// MySQL it is created beforehand, committed (see ensureRow; forgotten
	// first, since a Move is rare and the row may have been deleted); on
	// PostgreSQL in the transaction.
	release, err := v.turn.take(ctx)
	if err != nil {
		return err
	}
	defer release()
	v.rows.del(resource)
	if err := v.ensureRow(ctx, resource); err != nil {
		return err
	}
	tx, rollback, err := v.begin(ctx)
	if err != nil {
		return err
	}
	defer rollback()
	if !v.f.rowFirst {
		if _, err := tx.ExecContext(ctx, v.sql.ensure, resource); err != nil {
			return fmt.Errorf("sqlverifier: move %q: %w", resource, v.noTable.Explain(err))
		}
	}
	var seq int64
	var holder string
	var lock sql.NullString
	if err := tx.QueryRowContext(ctx, v.sql.check, resource).Scan(&seq, &holder, &lock); err != nil {
		return fmt.Errorf("sqlverifier: move %q: %w", resource, v.noTable.Explain(err))
	}
	if lock.Valid && lock.String != from {
		return &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: lock.String}
	}
	if _, err := tx.ExecContext(ctx, v.sql.move, to, resource); err != nil {
		return fmt.Errorf("sqlverifier: move %q: %w", resource, v.noTable.Explain(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlverifier: move %q: commit: %w", resource, err)
	}
	return nil
}
