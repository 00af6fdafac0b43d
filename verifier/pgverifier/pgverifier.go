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
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

//go:embed move.sql
var moveSQL string

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
type Option func(*scaffold.Config) error

// kind is this package, to the verifier scaffold.
var kind = &scaffold.Kind{Pkg: "pgverifier", ErrInvalid: ErrInvalid}

// WithHooks reports every token the verifier accepts or refuses (Claim,
// Guard, WithTx and Exec, once each) to h's Verified function (verifier
// "postgres", as for sqlverifier's Postgres dialect; see package observe).
// A nil h is invalid. The default is no hooks.
func WithHooks(h *observe.Hooks) Option { return Option(kind.WithHooks(h)) }

// WithClockBound refuses tokens whose Seq is more than bound above this
// process's clock, in microseconds since the Unix epoch, with an error
// wrapping verifier.ErrAhead, before any I/O: for locks whose counters
// follow the clock (lease.WithClockFloor), so that a forged token cannot
// raise a high-water out of the real counter's reach. 24h matches the
// lease side's bound. A negative bound is invalid. The default is 0: no
// bound.
func WithClockBound(bound time.Duration) Option { return Option(kind.WithClockBound(bound)) }

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
func WithTable(parts ...string) Option { return Option(kind.WithTable(parts...)) }

// Verifier is a fencing-token verifier on PostgreSQL. It keeps each
// resource's high-water in a table (see package migrations) and checks
// tokens with one guard statement that can run in the caller's transaction,
// next to the data it protects. It is safe for concurrent use if its DB is
// (a *pgxpool.Pool is; a *pgx.Conn or a pgx.Tx is not).
type Verifier struct {
	base       scaffold.Base
	db         DB
	table      string // quoted
	guardSQL   string
	highestSQL string
	moveSQL    string
	resetSQL   string
	noTable    scaffold.NoTable
}

var (
	_ verifier.Verifier = (*Verifier)(nil)
	_ verifier.Mover    = (*Verifier)(nil)
	_ verifier.Resetter = (*Verifier)(nil)
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
	c := scaffold.Config{Table: []string{DefaultTable}, Ident: identOK}
	if err := scaffold.Apply(kind, &c, opts); err != nil {
		return nil, err
	}
	table := pgx.Identifier(c.Table).Sanitize()
	return &Verifier{
		base:       kind.Base(observe.VerifierPostgres, c),
		db:         db,
		table:      table,
		guardSQL:   scaffold.PostgresGuard(table),
		highestSQL: scaffold.PostgresHighest(table),
		moveSQL:    strings.ReplaceAll(moveSQL, "{{table}}", table),
		resetSQL:   scaffold.PostgresReset(table),
		noTable:    scaffold.NoTable{Table: table, Apply: "migrations.Apply", Default: len(c.Table) == 1 && c.Table[0] == DefaultTable},
	}, nil
}

// identOK checks one part of a table name.
func identOK(part string) error {
	if !identPart.MatchString(part) {
		return invalid("table name part %q must be 1 to 63 bytes without NUL", part)
	}
	return nil
}

// b returns v's scaffold; nil for a nil v.
func (v *Verifier) b() *scaffold.Base {
	if v == nil {
		return nil
	}
	return &v.base
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
	return kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		return v.guard(ctx, v.db, c)
	})
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
func (v *Verifier) Guard(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	return kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		if isnil.Nil(q) {
			return invalid("Guard: nil Querier")
		}
		return v.guard(ctx, q, c)
	})
}

// guard runs the guard statement for c on q and, when it refuses, reads
// why on q (see scaffold.Guard). Run in the guard's transaction, the read
// sees the row the guard locked; run after it (Claim on a pool), the row
// may have changed in between, and the guard is tried again.
func (v *Verifier) guard(ctx context.Context, q Querier, c scaffold.Claim) error {
	try := func() (bool, error) {
		var seq int64
		err := q.QueryRow(ctx, v.guardSQL, scaffold.GuardArgs(c)...).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("pgverifier: guard %q: %w", c.Resource(), v.noTable.Explain(err))
		}
		return true, nil
	}
	return kind.Guard(c, try, func() (scaffold.Row, error) { return v.highest(ctx, q, c.Resource()) })
}

// Move binds resource to lock to and forgets its high-water, provided it
// is bound to from or to no lock yet; otherwise it returns a
// *verifier.ForeignError and changes nothing. See [verifier.Mover]. It is
// one statement on the verifier's DB.
func (v *Verifier) Move(ctx context.Context, resource, from, to string) error {
	if err := kind.Usable(ctx, v.b()); err != nil {
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
			return fmt.Errorf("pgverifier: move %q: %w", resource, v.noTable.Explain(err))
		}
		row, err := v.highest(ctx, v.db, resource)
		if err != nil {
			return fmt.Errorf("pgverifier: move %q refused, and reading its lock failed: %w", resource, err)
		}
		if row.Lock != "" && row.Lock != from {
			return &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: row.Lock}
		}
		if attempt == maxMoveAttempts {
			return fmt.Errorf("pgverifier: move %q refused: the row changed while its refusal was read; try again", resource)
		}
	}
}

// Reset sets resource's high-water to to and binds it to lock to.Key,
// whatever they were; see [verifier.Resetter] for which token to give. It
// is one statement on the verifier's DB; it waits for a transaction that
// holds the resource's row.
func (v *Verifier) Reset(ctx context.Context, resource string, to fence.Token) error {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return err
	}
	if err := verifier.ValidateReset(resource, to); err != nil {
		return err
	}
	var seq int64
	if err := v.db.QueryRow(ctx, v.resetSQL, scaffold.ResetArgs(resource, to)...).Scan(&seq); err != nil {
		return fmt.Errorf("pgverifier: reset %q: %w", resource, v.noTable.Explain(err))
	}
	return nil
}

// maxMoveAttempts bounds the tries of a Move whose refusal could not be
// explained because the row changed in between.
const maxMoveAttempts = 3

// Highest returns the high-water of resource: the highest Seq it accepted
// and the holder that presented it, or 0 and "" if it has none.
func (v *Verifier) Highest(ctx context.Context, resource string) (seq uint64, holder string, err error) {
	row, err := v.row(ctx, resource, "high-water")
	return row.Seq, row.Holder, err
}

// Lock returns the lock resource is bound to, or "" if none.
func (v *Verifier) Lock(ctx context.Context, resource string) (string, error) {
	row, err := v.row(ctx, resource, "lock")
	return row.Lock, err
}

// row is Highest and Lock: the checks, then the read on the verifier's DB.
func (v *Verifier) row(ctx context.Context, resource, what string) (scaffold.Row, error) {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return scaffold.Row{}, err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return scaffold.Row{}, err
	}
	row, err := v.highest(ctx, v.db, resource)
	if err != nil {
		return scaffold.Row{}, fmt.Errorf("pgverifier: %s of %q: %w", what, resource, v.noTable.Explain(err))
	}
	return row, nil
}

// highest reads the high-water of resource and the lock it is bound to.
func (v *Verifier) highest(ctx context.Context, q Querier, resource string) (scaffold.Row, error) {
	var row scaffold.Row
	var s int64
	err := q.QueryRow(ctx, v.highestSQL, resource).Scan(&s, &row.Holder, &row.Lock)
	if errors.Is(err, pgx.ErrNoRows) {
		return scaffold.Row{}, nil
	}
	if err != nil {
		return scaffold.Row{}, err
	}
	row.Seq = uint64(s)
	return row, nil
}

// Table returns the quoted name of the high-water table, ready to put in
// SQL; "" for a nil *Verifier.
func (v *Verifier) Table() string {
	if v == nil {
		return ""
	}
	return v.table
}
