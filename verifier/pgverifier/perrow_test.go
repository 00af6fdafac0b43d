package pgverifier_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// The per-row pattern keeps the high-water in the protected row itself, in
// fence_seq, fence_holder and fence_lock columns, and fences the write with
// the UPDATE's own WHERE: no separate table, one statement.
const (
	createItems = `CREATE TABLE items (
		id           text     PRIMARY KEY,
		log          text[]   NOT NULL DEFAULT '{}',
		fence_seq    bigint   NOT NULL DEFAULT 0,
		fence_holder text     NOT NULL DEFAULT '',
		fence_lock   text)`

	// fencedUpdate appends $5 to the row's log if the token ($2, $3, lock $4) is
	// accepted by the row's high-water, and raises the high-water to it.
	fencedUpdate = `UPDATE items
		SET log = array_append(log, $5), fence_seq = $2, fence_holder = $3, fence_lock = $4
		WHERE id = $1 AND (fence_lock IS NULL OR fence_lock = $4)
		  AND (fence_seq < $2 OR (fence_seq = $2 AND fence_holder = $3))`

	// fencedClaim is the same without a write: it only raises the row's
	// high-water, e.g. before reading the row in another statement.
	fencedClaim = `UPDATE items
		SET fence_seq = $2, fence_holder = $3, fence_lock = $4
		WHERE id = $1 AND (fence_lock IS NULL OR fence_lock = $4)
		  AND (fence_seq < $2 OR (fence_seq = $2 AND fence_holder = $3))`

	// rowMove binds the row to lock $3 and forgets its high-water, if it
	// is bound to $2 or to none.
	rowMove = `UPDATE items SET fence_seq = 0, fence_holder = '', fence_lock = $3
		WHERE id = $1 AND (fence_lock IS NULL OR fence_lock = $2)`

	// rowReset sets the row's high-water and lock to $2, $3 and $4,
	// whatever they were (the way back from a poisoned high-water).
	rowReset = `INSERT INTO items (id, fence_seq, fence_holder, fence_lock) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET fence_seq = excluded.fence_seq,
		    fence_holder = excluded.fence_holder, fence_lock = excluded.fence_lock
		RETURNING fence_seq`

	rowHighest = `SELECT fence_seq, fence_holder, coalesce(fence_lock, '') FROM items WHERE id = $1`
)

// perRow is a verifier built on the per-row pattern, so that the conformance
// suite checks the pattern as documented.
type perRow struct{ db *connPool }

func (p perRow) Claim(ctx context.Context, resource string, tok fence.Token) error {
	return p.exec(ctx, resource, tok, fencedClaim, false)
}

func (p perRow) write(ctx context.Context, resource string, tok fence.Token, fail bool) error {
	return p.exec(ctx, resource, tok, fencedUpdate, fail)
}

func (p perRow) exec(ctx context.Context, resource string, tok fence.Token, sql string, fail bool) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", verifier.ErrInvalid)
	}
	if err := verifier.ValidateClaim(resource, tok); err != nil {
		return err
	}
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Rows normally exist already; the suite writes to fresh ones.
	if _, err := tx.Exec(ctx, `INSERT INTO items (id) VALUES ($1) ON CONFLICT DO NOTHING`, resource); err != nil {
		return err
	}
	args := []any{resource, int64(tok.Seq), tok.Holder, tok.Key}
	if sql == fencedUpdate {
		args = append(args, strconv.FormatUint(tok.Seq, 10)+":"+tok.Holder)
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		// Rejected (the row exists). Its high-water, for the error.
		var seq int64
		var holder, lock string
		if err := tx.QueryRow(ctx, rowHighest, resource).Scan(&seq, &holder, &lock); err != nil {
			return err
		}
		if lock != "" && lock != tok.Key {
			return &verifier.ForeignError{Resource: resource, Token: tok, Lock: lock}
		}
		return &verifier.StaleError{Resource: resource, Token: tok, Highest: uint64(seq), HighestHolder: holder}
	}
	if fail {
		return errors.New("the write failed after the fenced update")
	}
	return tx.Commit(ctx)
}

func (p perRow) Move(ctx context.Context, resource, from, to string) error {
	if err := verifier.ValidateMove(resource, from, to); err != nil {
		return err
	}
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `INSERT INTO items (id) VALUES ($1) ON CONFLICT DO NOTHING`, resource); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, rowMove, resource, from, to)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		var lock string
		if err := tx.QueryRow(ctx, `SELECT fence_lock FROM items WHERE id = $1`, resource).Scan(&lock); err != nil {
			return err
		}
		return &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: lock}
	}
	return tx.Commit(ctx)
}

func (p perRow) Reset(ctx context.Context, resource string, to fence.Token) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", verifier.ErrInvalid)
	}
	if err := verifier.ValidateReset(resource, to); err != nil {
		return err
	}
	var seq int64
	return p.db.QueryRow(ctx, rowReset, resource, int64(to.Seq), to.Holder, to.Key).Scan(&seq)
}

func TestPerRowFence(t *testing.T) {
	conn := connect(t, dsn)
	_, err := conn.Exec(t.Context(), createItems)
	require.NoError(t, err)
	p := perRow{db: newConnPool(t, dsn, 32)}
	verifiertest.Run(t, verifiertest.Harness{
		V: p,
		Highest: func(ctx context.Context, resource string) (uint64, string, error) {
			if err := verifier.ValidateResource(resource); err != nil {
				return 0, "", err
			}
			var seq int64
			var holder, lock string
			err := conn.QueryRow(ctx, rowHighest, resource).Scan(&seq, &holder, &lock)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, "", nil
			}
			return uint64(seq), holder, err
		},
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			return p.write(ctx, resource, tok, false)
		},
		Log: func(ctx context.Context, resource string) ([]fence.Token, error) {
			var entries []string
			err := conn.QueryRow(ctx, `SELECT log FROM items WHERE id = $1`, resource).Scan(&entries)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, nil
			}
			toks := make([]fence.Token, 0, len(entries))
			for _, e := range entries {
				seq, holder, _ := strings.Cut(e, ":")
				n, perr := strconv.ParseUint(seq, 10, 64)
				if perr != nil {
					return nil, fmt.Errorf("log entry %q: %w", e, perr)
				}
				toks = append(toks, fence.Token{Seq: n, Holder: holder})
			}
			return toks, err
		},
		FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
			return p.write(ctx, resource, tok, true)
		},
	})
}
