package sqlverifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// The per-row pattern of the package documentation: the high-water is kept
// in the protected row itself (fence_seq, fence_holder, fence_lock) and the
// write is the UPDATE whose WHERE accepts the token. perRowSQL is it for one
// target, with ? placeholders (q turns them into $n for PostgreSQL).
type perRowSQL struct {
	tg     target
	create []string
	ensure string
}

const (
	// perRowUpdate appends ? to the row's log when the token is accepted
	// and raises the row's high-water to it. ? = entry, seq, holder, lock,
	// id, lock, seq, seq, holder.
	perRowUpdate = `UPDATE %s SET log = log || ?, fence_seq = ?, fence_holder = ?, fence_lock = ?
		WHERE id = ? AND (fence_lock IS NULL OR fence_lock = ?) AND (fence_seq < ? OR (fence_seq = ? AND fence_holder = ?))`
	// perRowClaim is the same without a write. ? = seq, holder, lock, id,
	// lock, seq, seq, holder.
	perRowClaim = `UPDATE %s SET fence_seq = ?, fence_holder = ?, fence_lock = ?
		WHERE id = ? AND (fence_lock IS NULL OR fence_lock = ?) AND (fence_seq < ? OR (fence_seq = ? AND fence_holder = ?))`
	// perRowRead reads the fence columns, locked (MySQL's REPEATABLE READ
	// would otherwise read the transaction's snapshot). ? = id.
	perRowRead = `SELECT fence_seq, fence_holder, coalesce(fence_lock, '') FROM %s WHERE id = ? FOR UPDATE`
	// perRowReset sets the fence columns whatever they were (the way back
	// from a poisoned high-water). ? = seq, holder, lock, id.
	perRowReset = `UPDATE %s SET fence_seq = ?, fence_holder = ?, fence_lock = ? WHERE id = ?`
	perRowMove  = `UPDATE %s SET fence_seq = 0, fence_holder = '', fence_lock = ? WHERE id = ? AND (fence_lock IS NULL OR fence_lock = ?)`
)

// perRow is a verifier built on the per-row pattern, so that the
// conformance suite checks the pattern as documented, on every target.
type perRow struct {
	db    *sql.DB
	tg    target
	table string
}

func (p perRow) sql(format string) string {
	q := fmt.Sprintf(format, p.table)
	if p.tg.d == sqlverifier.MySQL { // || is OR there
		q = strings.ReplaceAll(q, "log || ?", "concat(log, ?)")
	}
	return p.tg.q(q)
}

// ensure makes the row, committed on its own (rows normally exist; the
// suite writes to fresh ones). On MySQL a row inserted by a transaction
// that rolls back would make its waiters deadlock (see ensure.sql).
func (p perRow) ensure(ctx context.Context, resource string) error {
	q := `INSERT IGNORE INTO %s (id) VALUES (?)`
	if p.tg.d == sqlverifier.Postgres {
		q = `INSERT INTO %s (id) VALUES (?) ON CONFLICT DO NOTHING`
	}
	_, err := p.db.ExecContext(ctx, p.sql(q), resource)
	return err
}

func (p perRow) Reset(ctx context.Context, resource string, to fence.Token) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", verifier.ErrInvalid)
	}
	if err := verifier.ValidateReset(resource, to); err != nil {
		return err
	}
	if err := p.ensure(ctx, resource); err != nil {
		return err
	}
	_, err := p.db.ExecContext(ctx, p.sql(perRowReset), int64(to.Seq), to.Holder, to.Key, resource)
	return err
}

func (p perRow) Claim(ctx context.Context, resource string, tok fence.Token) error {
	return p.write(ctx, resource, tok, false, false)
}

// write runs the fenced UPDATE (with a log entry when entry is set) in a
// transaction, and commits unless fail.
func (p perRow) write(ctx context.Context, resource string, tok fence.Token, entry, fail bool) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", verifier.ErrInvalid)
	}
	if err := verifier.ValidateClaim(resource, tok); err != nil {
		return err
	}
	if err := p.ensure(ctx, resource); err != nil {
		return err
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	seq := int64(tok.Seq)
	query, args := p.sql(perRowClaim), []any{seq, tok.Holder, tok.Key, resource, tok.Key, seq, seq, tok.Holder}
	if entry {
		query, args = p.sql(perRowUpdate), append([]any{strconv.FormatUint(tok.Seq, 10) + ":" + tok.Holder + ","}, args...)
	}
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		// Refused, or (MySQL without clientFoundRows counts changed rows)
		// a claim that changed nothing: the row already holds tok. The
		// locked row tells.
		var hseq int64
		var holder, lock string
		if err := tx.QueryRowContext(ctx, p.sql(perRowRead), resource).Scan(&hseq, &holder, &lock); err != nil {
			return err
		}
		switch {
		case lock != "" && lock != tok.Key:
			return &verifier.ForeignError{Resource: resource, Token: tok, Lock: lock}
		case uint64(hseq) != tok.Seq || holder != tok.Holder || lock != tok.Key:
			return &verifier.StaleError{Resource: resource, Token: tok, Highest: uint64(hseq), HighestHolder: holder}
		}
	}
	if fail {
		return errors.New("the write failed after the fenced update")
	}
	return tx.Commit()
}

func (p perRow) Move(ctx context.Context, resource, from, to string) error {
	if err := verifier.ValidateMove(resource, from, to); err != nil {
		return err
	}
	if err := p.ensure(ctx, resource); err != nil {
		return err
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var seq int64
	var holder, lock string
	if err := tx.QueryRowContext(ctx, p.sql(perRowRead), resource).Scan(&seq, &holder, &lock); err != nil {
		return err
	}
	if lock != "" && lock != from {
		return &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: lock}
	}
	if _, err := tx.ExecContext(ctx, p.sql(perRowMove), to, resource, from); err != nil {
		return err
	}
	return tx.Commit()
}

// TestPerRowFence runs the conformance suite on the per-row pattern, on
// every target.
func TestPerRowFence(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		db := tg.open(t)
		p := perRow{db: db, tg: tg, table: tg.ident(strings.ReplaceAll("items_"+tg.name, "-", "_"))}
		ddl := `CREATE TABLE %s (id VARBINARY(1024) PRIMARY KEY, log LONGTEXT NOT NULL DEFAULT '',
			fence_seq BIGINT UNSIGNED NOT NULL DEFAULT 0, fence_holder VARBINARY(64) NOT NULL DEFAULT '',
			fence_lock VARBINARY(512) NULL) ENGINE=InnoDB`
		if tg.d == sqlverifier.Postgres {
			ddl = `CREATE TABLE %s (id text PRIMARY KEY, log text NOT NULL DEFAULT '',
				fence_seq bigint NOT NULL DEFAULT 0, fence_holder text NOT NULL DEFAULT '', fence_lock text)`
		}
		for _, q := range []string{`DROP TABLE IF EXISTS %s`, ddl} {
			_, err := db.ExecContext(ctx, fmt.Sprintf(q, p.table))
			require.NoError(t, err)
		}
		verifiertest.Run(t, verifiertest.Harness{
			V: p,
			Highest: func(ctx context.Context, resource string) (uint64, string, error) {
				if err := verifier.ValidateResource(resource); err != nil {
					return 0, "", err
				}
				var seq int64
				var holder string
				err := db.QueryRowContext(ctx, p.sql(`SELECT fence_seq, fence_holder FROM %s WHERE id = ?`), resource).Scan(&seq, &holder)
				if errors.Is(err, sql.ErrNoRows) {
					return 0, "", nil
				}
				return uint64(seq), holder, err
			},
			Write: func(ctx context.Context, resource string, tok fence.Token) error {
				return p.write(ctx, resource, tok, true, false)
			},
			Log: func(ctx context.Context, resource string) ([]fence.Token, error) {
				var log string
				err := db.QueryRowContext(ctx, p.sql(`SELECT log FROM %s WHERE id = ?`), resource).Scan(&log)
				if errors.Is(err, sql.ErrNoRows) {
					return nil, nil
				}
				if err != nil {
					return nil, err
				}
				var toks []fence.Token
				for e := range strings.SplitSeq(strings.TrimSuffix(log, ","), ",") {
					if e == "" {
						continue
					}
					seq, holder, _ := strings.Cut(e, ":")
					n, err := strconv.ParseUint(seq, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("log entry %q: %w", e, err)
					}
					toks = append(toks, fence.Token{Seq: n, Holder: holder})
				}
				return toks, nil
			},
			FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
				return p.write(ctx, resource, tok, true, true)
			},
		})
	})
}
