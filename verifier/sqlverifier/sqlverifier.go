package sqlverifier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
)

// Querier runs statements. *sql.DB, *sql.Conn and *sql.Tx all satisfy it.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is a Querier that can also begin a transaction. *sql.DB and *sql.Conn
// satisfy it.
type DB interface {
	Querier
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// DefaultTable is the table the verifier uses unless [WithTable] says
// otherwise; package migrations creates it.
const DefaultTable = "fence_tokens"

// Option configures a Verifier. An option checks its own argument; [New]
// returns the first option's error, which wraps [ErrInvalid].
type Option func(*config) error

type config struct {
	dialect Dialect
	table   []string
	hooks   *observe.Hooks
}

// WithHooks reports every token the verifier accepts or refuses (Claim,
// Guard, WithTx and Exec, once each) to h's Verified function, as verifier
// "mysql" or "postgres-sql" (see package observe). A nil h is invalid. The
// default is no hooks.
func WithHooks(h *observe.Hooks) Option {
	return func(c *config) error {
		if h == nil {
			return invalid("nil hooks")
		}
		c.hooks = h
		return nil
	}
}

// WithTable sets the high-water table, as one name or as schema (MySQL:
// database) and name ("app", "fence_tokens"). Each part is quoted as an
// identifier of the dialect, so it is used verbatim; each must be valid
// UTF-8 without NUL, 1 to 63 bytes for Postgres (longer names would be
// truncated, silently naming another table) or 1 to 64 characters for
// MySQL. The table must have the columns of the one in package migrations.
// The default is [DefaultTable], in the connection's current schema or
// database.
func WithTable(parts ...string) Option {
	return func(c *config) error {
		if len(parts) == 0 || len(parts) > 2 {
			return invalid("table name has %d parts, want 1 or 2", len(parts))
		}
		for _, p := range parts {
			if !c.dialect.identOK(p) {
				return invalid("table name part %q is not a valid %s identifier", p, c.dialect)
			}
		}
		c.table = append([]string(nil), parts...)
		return nil
	}
}

// Verifier is a fencing-token verifier on a database/sql database, MySQL,
// MariaDB or PostgreSQL. It keeps each resource's high-water (and the lock
// the resource belongs to) in a table (see package migrations) and checks
// tokens with a guard that runs in the caller's transaction, next to the
// data it protects. It is safe for concurrent use; on a *sql.Conn, calls
// take turns on its one session.
type Verifier struct {
	db    DB
	d     Dialect
	table string // quoted
	sql   statements
	hooks *observe.Hooks
	rows  known // MySQL: resources whose row exists
}

var (
	_ verifier.Verifier = (*Verifier)(nil)
	_ verifier.Mover    = (*Verifier)(nil)
	_ DB                = (*sql.DB)(nil)
	_ DB                = (*sql.Conn)(nil)
	_ Querier           = (*sql.Tx)(nil)
)

// New returns a verifier that runs Claim, Highest, WithTx, Exec and Move on
// db, a database of the given dialect.
//
// It checks that db is neither nil nor a typed nil (a nil *sql.DB), that
// dialect is [MySQL] or [Postgres], and that no option is nil or was given
// a bad value; otherwise it returns an error wrapping [ErrInvalid]. It does
// no I/O: the table must exist (see package migrations) before the first
// call. With no options the table is [DefaultTable].
func New(db DB, dialect Dialect, opts ...Option) (*Verifier, error) {
	if isnil.Nil(db) {
		return nil, invalid("New: nil DB")
	}
	if dialect != MySQL && dialect != Postgres {
		return nil, invalid("New: unknown dialect %v", dialect)
	}
	c := config{dialect: dialect, table: []string{DefaultTable}}
	for i, o := range opts {
		if o == nil {
			return nil, invalid("New: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	quoted := make([]string, len(c.table))
	for i, p := range c.table {
		quoted[i] = dialect.quote(p)
	}
	table := strings.Join(quoted, ".")
	return &Verifier{db: db, d: dialect, table: table, sql: dialect.statements(table), hooks: c.hooks}, nil
}

// Claim checks tok for resource and raises the resource's high-water to it,
// committed at once. It returns a *verifier.StaleError when tok is older
// than the high-water and a *verifier.ForeignError when the resource
// belongs to another lock; see [verifier.Verifier] for the other errors.
//
// It is a short transaction: the guard and, when needed, a read of the row
// the guard locked. Claim alone does not fence a later
// write in another transaction: use [Verifier.WithTx], [Verifier.Exec], or
// [Verifier.Guard] in your own transaction.
func (v *Verifier) Claim(ctx context.Context, resource string, tok fence.Token) (err error) {
	if err := v.usable(ctx); err != nil {
		return err
	}
	defer v.report(ctx, resource, tok, time.Now(), &err)
	if err := verifier.ValidateClaim(resource, tok); err != nil {
		return err
	}
	// A refusal is explained by a read of the row the guard locked; in one
	// transaction, a Move or a newer token cannot slip in between.
	return v.inTx(ctx, resource, tok, nil)
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

// Guard runs the guard on q, which should be the caller's transaction: it
// makes that transaction the holder of the resource's high-water row until
// it ends. Run it before the transaction reads what it will write (claim
// before read). If the transaction rolls back, so does the raised
// high-water.
//
// It returns nil when tok is accepted, a *verifier.StaleError when it is
// older than the high-water, and a *verifier.ForeignError when the resource
// belongs to another lock; a refusal leaves the transaction usable, so the
// caller decides whether to roll back (it should). Other errors come from
// the database, unchanged in the chain (errors.As with *mysql.MySQLError or
// *pgconn.PgError works); the transaction may then be aborted (MySQL rolls
// back the whole transaction on a deadlock). A nil or typed-nil q returns an
// error wrapping [ErrInvalid].
//
// On MySQL, q must be a transaction (or a *sql.Conn inside one): outside a
// transaction the guard's locking read may see a later token than its own
// and report a token that was accepted, and then overtaken, as stale (on
// PostgreSQL the verdict is exact, but a refusal's details are read after
// the guard's own commit, so a racing Move can make stale look foreign).
// Guard uses no connection but q's. On MySQL, when the resource has no row
// yet, the guard inserts it in q's transaction; if that transaction rolls
// back while other guards of the resource wait for the row, InnoDB reports
// deadlocks (error 1213) to them. WithTx, Exec, Claim and Move avoid that by
// creating the row, committed on its own, before they begin.
func (v *Verifier) Guard(ctx context.Context, q Querier, resource string, tok fence.Token) (err error) {
	if err := v.usable(ctx); err != nil {
		return err
	}
	defer v.report(ctx, resource, tok, time.Now(), &err)
	if isnil.Nil(q) {
		return invalid("Guard: nil Querier")
	}
	if err := verifier.ValidateClaim(resource, tok); err != nil {
		return err
	}
	return v.guard(ctx, q, resource, tok)
}

// ensureRow makes sure, on MySQL, that resource has a committed row before
// a transaction guards it (see mysql/ensure.sql): on the verifier's DB, in
// a statement of its own, once per resource and process. The probe, a
// consistent read, comes first so that a caller's transaction that already
// holds the row's lock cannot make the insert wait for it.
func (v *Verifier) ensureRow(ctx context.Context, resource string) error {
	if v.d != MySQL || v.rows.has(resource) {
		return nil
	}
	var one int
	err := v.db.QueryRowContext(ctx, v.sql.probe, resource).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = v.db.ExecContext(ctx, v.sql.ensure, resource)
	}
	if err != nil {
		return fmt.Errorf("sqlverifier: guard %q: creating its row: %w", resource, err)
	}
	v.rows.add(resource)
	return nil
}

// report tells the hooks, if any, how a check that began at start ended.
func (v *Verifier) report(ctx context.Context, resource string, tok fence.Token, start time.Time, err *error) {
	if p := recover(); p != nil {
		// A panic in the caller's function rolled the transaction back:
		// report an error, not the nil *err, and go on panicking.
		if v.hooks != nil {
			emit.Verified(v.hooks, ctx, v.d.verifierName(), resource, tok, start, fmt.Errorf("sqlverifier: panic: %v", p))
		}
		panic(p)
	}
	if v.hooks != nil {
		emit.Verified(v.hooks, ctx, v.d.verifierName(), resource, tok, start, *err)
	}
}

// guard is Guard once its arguments are known to be valid.
func (v *Verifier) guard(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	seq := int64(tok.Seq)
	if v.d == Postgres {
		var got int64
		err := q.QueryRowContext(ctx, v.sql.guard, resource, seq, tok.Holder, tok.Key).Scan(&got)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlverifier: guard %q: %w", resource, err)
		}
		// Refused; the row is locked, read why.
	} else {
		// The fast path: an UPDATE of the row ensureRow created.
		res, err := q.ExecContext(ctx, v.sql.update, tok.Key, tok.Holder, seq, resource, tok.Key, seq, seq, tok.Holder)
		if err != nil {
			return fmt.Errorf("sqlverifier: guard %q: %w", resource, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			return nil
		}
		// Refused, a repeat, or no row (never made here, or deleted since):
		// the full guard tells, and the next begin makes sure of the row.
		v.rows.del(resource)
		res, err = q.ExecContext(ctx, v.sql.guard, resource, seq, tok.Holder, tok.Key)
		if err != nil {
			return fmt.Errorf("sqlverifier: guard %q: %w", resource, err)
		}
		// 2: an existing row was changed, which only an accepted token does.
		if n, err := res.RowsAffected(); err == nil && n == 2 {
			return nil
		}
	}
	return v.check(ctx, q, resource, tok)
}

// check reads the locked high-water row after a guard that was refused
// (Postgres) or whose outcome is not known yet (MySQL): the token was
// accepted if and only if the row now holds it.
func (v *Verifier) check(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	var seq int64
	var holder string
	var lock sql.NullString
	err := q.QueryRowContext(ctx, v.sql.check, resource).Scan(&seq, &holder, &lock)
	if err != nil {
		// ErrNoRows too: the guard made sure the row exists.
		return fmt.Errorf("sqlverifier: guard %q: reading the high-water: %w", resource, err)
	}
	switch {
	case lock.Valid && lock.String != tok.Key:
		return &verifier.ForeignError{Resource: resource, Token: tok, Lock: lock.String}
	case lock.Valid && uint64(seq) == tok.Seq && holder == tok.Holder:
		return nil
	}
	return &verifier.StaleError{Resource: resource, Token: tok, Highest: uint64(seq), HighestHolder: holder}
}

// Highest returns the high-water of resource: the highest Seq it accepted
// and the holder that presented it, or 0 and "" if it has none (never
// written, or moved to another lock since).
func (v *Verifier) Highest(ctx context.Context, resource string) (seq uint64, holder string, err error) {
	if err := v.usable(ctx); err != nil {
		return 0, "", err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return 0, "", err
	}
	var s int64
	err = v.db.QueryRowContext(ctx, v.sql.highest, resource).Scan(&s, &holder)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("sqlverifier: high-water of %q: %w", resource, err)
	}
	return uint64(s), holder, nil
}

// Table returns the quoted name of the high-water table, ready to put in
// SQL; "" for a nil *Verifier.
func (v *Verifier) Table() string {
	if v == nil {
		return ""
	}
	return v.table
}

// Dialect returns the verifier's dialect; 0 for a nil *Verifier.
func (v *Verifier) Dialect() Dialect {
	if v == nil {
		return 0
	}
	return v.d
}
