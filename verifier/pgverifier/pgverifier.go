package pgverifier

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
)

var (
	//go:embed guard.sql
	guardSQL string
	//go:embed highest.sql
	highestSQL string
	//go:embed move.sql
	moveSQL string
)

// Querier runs a statement that returns at most one row. *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all satisfy it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is a Querier that can also begin a transaction. *pgxpool.Pool,
// *pgx.Conn and pgx.Tx (which begins a savepoint) all satisfy it.
type DB interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DefaultTable is the table the verifier uses unless [WithTable] says
// otherwise; package migrations creates it.
const DefaultTable = "fence_tokens"

// Option configures a Verifier. An option checks its own argument; [New]
// returns the first option's error, which wraps [ErrInvalid].
type Option func(*config) error

type config struct {
	table pgx.Identifier
	hooks *observe.Hooks
}

// WithHooks reports every token the verifier accepts or refuses (Claim,
// Guard, WithTx and Exec, once each) to h's Verified function (verifier
// "postgres"; see package observe). A nil h is invalid. The default is no
// hooks.
func WithHooks(h *observe.Hooks) Option {
	return func(c *config) error {
		if h == nil {
			return invalid("nil hooks")
		}
		c.hooks = h
		return nil
	}
}

// WithTable sets the high-water table, as one name or as schema and name
// ("app", "fence_tokens"). Each part is quoted as an identifier, so it is
// used verbatim, case included; each must be 1 to 63 bytes without NUL
// (longer names would be truncated by PostgreSQL, NUL dropped by pgx, and
// either would silently name another table). The table must have the
// columns of the one in package migrations, lock_key included: a table made
// for an earlier version needs "ALTER TABLE t ADD COLUMN lock_key text" and a
// seq check that allows 0 (see migrations/000002_fence_lock_binding.up.sql),
// or every guard fails with "column lock_key does not exist". The default is
// [DefaultTable], found through the search_path.
func WithTable(parts ...string) Option {
	return func(c *config) error {
		if len(parts) == 0 || len(parts) > 2 {
			return invalid("table name has %d parts, want 1 or 2", len(parts))
		}
		for _, p := range parts {
			if !identPart.MatchString(p) {
				return invalid("table name part %q must be 1 to 63 bytes without NUL", p)
			}
		}
		c.table = pgx.Identifier(append([]string(nil), parts...))
		return nil
	}
}

// Verifier is a fencing-token verifier on PostgreSQL. It keeps each
// resource's high-water in a table (see package migrations) and checks
// tokens with one guard statement that can run in the caller's transaction,
// next to the data it protects. It is safe for concurrent use if its DB is
// (a *pgxpool.Pool is; a *pgx.Conn or a pgx.Tx is not).
type Verifier struct {
	db         DB
	table      string // quoted
	guardSQL   string
	highestSQL string
	moveSQL    string
	hooks      *observe.Hooks
}

var (
	_ verifier.Verifier = (*Verifier)(nil)
	_ verifier.Mover    = (*Verifier)(nil)
)

// identPart matches a valid part of a table name: PostgreSQL truncates
// identifiers past 63 bytes, and pgx drops NUL bytes; both would silently
// name another table.
var identPart = regexp.MustCompile(`^[^\x00]{1,63}$`)

// New returns a verifier that runs Claim, Highest, WithTx and Exec on db.
//
// It checks that db is neither nil nor a typed nil (a nil *pgxpool.Pool or
// *pgx.Conn), and that no option is nil or was given a bad value; otherwise
// it returns an error wrapping [ErrInvalid]. It does no I/O: the table must
// exist (see package migrations) before the first call. With no options the
// table is [DefaultTable].
func New(db DB, opts ...Option) (*Verifier, error) {
	if isnil.Nil(db) {
		return nil, invalid("New: nil DB")
	}
	c := config{table: pgx.Identifier{DefaultTable}}
	for i, o := range opts {
		if o == nil {
			return nil, invalid("New: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	table := c.table.Sanitize()
	return &Verifier{
		db:         db,
		table:      table,
		guardSQL:   strings.ReplaceAll(guardSQL, "{{table}}", table),
		highestSQL: strings.ReplaceAll(highestSQL, "{{table}}", table),
		moveSQL:    strings.ReplaceAll(moveSQL, "{{table}}", table),
		hooks:      c.hooks,
	}, nil
}

// Claim checks tok for resource and raises the resource's high-water to it,
// as one statement on the verifier's DB (committed at once, unless that DB is
// a transaction). It returns a *verifier.StaleError when tok is rejected, a
// *verifier.ForeignError when the resource is bound to another lock than
// tok.Key; see [verifier.Verifier] for the other errors.
//
// Claim alone does not fence a later write in another transaction. Use
// [Verifier.WithTx], or [Verifier.Guard] in your own transaction, or the
// per-row fence columns described in the package documentation.
func (v *Verifier) Claim(ctx context.Context, resource string, tok fence.Token) error {
	if err := v.usable(ctx); err != nil {
		return err
	}
	return v.Guard(ctx, v.db, resource, tok)
}

// usable returns an error wrapping ErrInvalid if v was not made by New or
// ctx is nil.
func (v *Verifier) usable(ctx context.Context) error {
	switch {
	case v == nil:
		return invalid("nil *Verifier")
	case v.db == nil:
		return invalid("Verifier not made by New")
	case ctx == nil:
		return invalid("nil context")
	}
	return nil
}

// Guard runs the guard statement on q: usually the caller's transaction,
// which it makes the holder of the resource's high-water row until it ends.
// Run it before the transaction reads what it will write (claim before
// read). If the transaction rolls back, so does the raised high-water.
//
// It returns nil when tok is accepted and a *verifier.StaleError (or, for a
// token of another lock, a *verifier.ForeignError) when it is not; a refusal leaves the transaction usable, so the caller decides
// whether to roll back (it should). Other errors come from the database,
// unchanged in the chain (errors.As with *pgconn.PgError works), and then
// the transaction is aborted. A nil or typed-nil q returns an error
// wrapping [ErrInvalid].
func (v *Verifier) Guard(ctx context.Context, q Querier, resource string, tok fence.Token) (err error) {
	if err := v.usable(ctx); err != nil {
		return err
	}
	defer v.report(ctx, resource, tok, time.Now(), &err)
	return v.guard(ctx, q, resource, tok)
}

// report tells the hooks, if any, how a check that began at start ended.
func (v *Verifier) report(ctx context.Context, resource string, tok fence.Token, start time.Time, err *error) {
	if p := recover(); p != nil {
		// A panic in the caller's function rolled the transaction back:
		// report an error, not the nil *err, and go on panicking.
		if v.hooks != nil {
			emit.Verified(v.hooks, ctx, "postgres", resource, tok, start, fmt.Errorf("pgverifier: panic: %v", p))
		}
		panic(p)
	}
	if v.hooks != nil {
		emit.Verified(v.hooks, ctx, "postgres", resource, tok, start, *err)
	}
}

// guard is Guard once v and ctx are known to be usable.
func (v *Verifier) guard(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	if isnil.Nil(q) {
		return invalid("Guard: nil Querier")
	}
	if err := verifier.ValidateClaim(resource, tok); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		var seq int64
		err := q.QueryRow(ctx, v.guardSQL, v.guardArgs(resource, tok)...).Scan(&seq)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgverifier: guard %q: %w", resource, err)
		}
		err = v.refusal(ctx, q, resource, tok)
		if !errors.Is(err, errMoved) || attempt == maxAttempts {
			return err
		}
	}
}

// maxAttempts bounds the retries of a statement whose refusal could not be
// explained because the row changed in between.
const maxAttempts = 3

// errMoved: the row changed between a refusing statement and the read of
// its reason, so the reason is unknown; the statement is worth another try.
var errMoved = errors.New("the high-water changed while its refusal was read; try again")

// guardArgs are guard.sql's parameters.
func (v *Verifier) guardArgs(resource string, tok fence.Token) []any {
	return []any{resource, int64(tok.Seq), tok.Holder, tok.Key}
}

// refusal reads why the guard refused tok: a *verifier.ForeignError or a
// *verifier.StaleError. Run in the guard's transaction, this second
// statement sees the latest committed high-water (the guard waited for,
// and locked, the row), unlike a CTE in the guard itself, which would read
// the statement's older snapshot. Run after the guard's transaction ended
// (Claim on a pool), the row may have changed in between (a Move): when
// what it reads would accept tok, the error wraps errMoved.
func (v *Verifier) refusal(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	high, holder, lock, err := v.highest(ctx, q, resource)
	if err != nil {
		return fmt.Errorf("pgverifier: guard %q refused %v, and reading the high-water failed: %w", resource, tok, err)
	}
	if lock != "" && lock != tok.Key {
		return &verifier.ForeignError{Resource: resource, Token: tok, Lock: lock}
	}
	if tok.Supersedes(fence.Token{Seq: high, Holder: holder}) {
		return fmt.Errorf("pgverifier: guard %q refused %v: %w", resource, tok, errMoved)
	}
	return &verifier.StaleError{Resource: resource, Token: tok, Highest: high, HighestHolder: holder}
}

// Move binds resource to lock to and forgets its high-water, provided it
// is bound to from or to no lock yet; otherwise it returns a
// *verifier.ForeignError and changes nothing. See [verifier.Mover]. It is
// one statement on the verifier's DB.
func (v *Verifier) Move(ctx context.Context, resource, from, to string) error {
	if err := v.usable(ctx); err != nil {
		return err
	}
	if err := verifier.ValidateMove(resource, from, to); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		var seq int64
		err := v.db.QueryRow(ctx, v.moveSQL, resource, from, to).Scan(&seq)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgverifier: move %q: %w", resource, err)
		}
		_, _, lock, err := v.highest(ctx, v.db, resource)
		if err != nil {
			return fmt.Errorf("pgverifier: move %q refused, and reading its lock failed: %w", resource, err)
		}
		if lock != "" && lock != from {
			return &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: lock}
		}
		if attempt == maxAttempts {
			return fmt.Errorf("pgverifier: move %q refused: %w", resource, errMoved)
		}
	}
}

// Highest returns the high-water of resource: the highest Seq it accepted
// and the holder that presented it, or 0 and "" if it has none.
func (v *Verifier) Highest(ctx context.Context, resource string) (seq uint64, holder string, err error) {
	if err := v.usable(ctx); err != nil {
		return 0, "", err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return 0, "", err
	}
	seq, holder, _, err = v.highest(ctx, v.db, resource)
	if err != nil {
		return 0, "", fmt.Errorf("pgverifier: high-water of %q: %w", resource, err)
	}
	return seq, holder, nil
}

// highest reads the high-water of resource and the lock it is bound to.
func (v *Verifier) highest(ctx context.Context, q Querier, resource string) (seq uint64, holder, lock string, err error) {
	var s int64
	err = q.QueryRow(ctx, v.highestSQL, resource).Scan(&s, &holder, &lock)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", "", nil
	}
	if err != nil {
		return 0, "", "", err
	}
	return uint64(s), holder, lock, nil
}

// Lock returns the lock resource is bound to, or "" if none.
func (v *Verifier) Lock(ctx context.Context, resource string) (string, error) {
	if err := v.usable(ctx); err != nil {
		return "", err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return "", err
	}
	_, _, lock, err := v.highest(ctx, v.db, resource)
	if err != nil {
		return "", fmt.Errorf("pgverifier: lock of %q: %w", resource, err)
	}
	return lock, nil
}

// Table returns the quoted name of the high-water table, ready to put in
// SQL; "" for a nil *Verifier.
func (v *Verifier) Table() string {
	if v == nil {
		return ""
	}
	return v.table
}
