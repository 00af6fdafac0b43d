package sqlverifier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
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
type Option func(*scaffold.Config) error

// kind is this package, to the verifier scaffold.
var kind = &scaffold.Kind{Pkg: "sqlverifier", ErrInvalid: ErrInvalid}

// WithHooks reports every token the verifier accepts or refuses (Claim,
// Guard, WithTx and Exec, once each) to h's Verified function, as verifier
// "mysql" or "postgres" (the same name as pgverifier's; see package
// observe). A nil h is invalid. The default is no hooks.
func WithHooks(h *observe.Hooks) Option { return Option(kind.WithHooks(h)) }

// WithClockBound refuses tokens whose Seq is more than bound above this
// process's clock, in microseconds since the Unix epoch, with an error
// wrapping verifier.ErrAhead, before any I/O: for locks whose counters
// follow the clock (lease.WithClockFloor), so that a forged token cannot
// raise a high-water out of the real counter's reach. 24h matches the
// lease side's bound. A negative bound is invalid. The default is 0: no
// bound.
func WithClockBound(bound time.Duration) Option { return Option(kind.WithClockBound(bound)) }

// WithTable sets the high-water table, as one name or as schema (MySQL:
// database) and name ("app", "fence_tokens"). Each part is quoted as an
// identifier of the dialect, so it is used verbatim, quotes, ? and --
// included. Each must be valid UTF-8 without control characters (Unicode
// category Cc: NUL, tab, newline and the like are refused), 1 to 63 bytes
// for Postgres (longer names would be truncated, silently naming another
// table) or 1 to 64 characters for MySQL. The table must have the columns
// of the one in package migrations. The default is [DefaultTable], in the
// connection's current schema or database.
func WithTable(parts ...string) Option { return Option(kind.WithTable(parts...)) }

// Verifier is a fencing-token verifier on a database/sql database, MySQL,
// MariaDB or PostgreSQL. It keeps each resource's high-water (and the lock
// the resource belongs to) in a table (see package migrations) and checks
// tokens with a guard that runs in the caller's transaction, next to the
// data it protects. It is safe for concurrent use. On a *sql.Conn its
// calls take turns on the one session, each from its first statement to
// its commit or rollback (WithTx's fn included: fn must not call the
// verifier's other methods, which would wait for it; Guard with fn's
// transaction is fine); your own statements and transactions on that Conn
// are not in the turns, so do not run them while the verifier is in use.
// On MySQL it keeps its guard's statement
// prepared on its DB (*sql.DB or *sql.Conn), once per connection that ran
// it; [Verifier.Close] releases it. Make one Verifier per DB and table,
// and share it.
type Verifier struct {
	base  scaffold.Base
	db    DB
	d     Dialect
	f     *flavor
	table string // quoted
	sql   statements
	rows  known     // MySQL: resources whose row exists
	fast  *prepared // MySQL: the guard's fast path, prepared; nil if db cannot
	turn  turn      // on a *sql.Conn, the calls' turns on its session

	noTable scaffold.NoTable // what to do when the table is missing
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
	f := flavors[dialect]
	if f == nil {
		return nil, invalid("New: unknown dialect %v", dialect)
	}
	c := scaffold.Config{Table: []string{DefaultTable}, Ident: func(part string) error {
		if why := f.identOK(part); why != "" {
			return invalid("table name part %q is not a valid %s identifier: %s", part, dialect, why)
		}
		return nil
	}}
	if err := scaffold.Apply(kind, &c, opts); err != nil {
		return nil, err
	}
	quoted := make([]string, len(c.Table))
	for i, p := range c.Table {
		quoted[i] = f.quoteIdent(p)
	}
	table := strings.Join(quoted, ".")
	v := &Verifier{base: kind.Base(f.name, c), db: db, d: dialect, f: f, table: table, sql: f.statements(dialect, table), turn: newTurn(db),
		noTable: scaffold.NoTable{Table: table, Apply: "migrations.ApplySQL", Default: len(c.Table) == 1 && c.Table[0] == DefaultTable}}
	if f.rowFirst {
		v.fast = newPrepared(db, v.sql.update)
		if v.fast != nil {
			// A Verifier dropped without Close lets go of its statement.
			runtime.AddCleanup(v, func(p *prepared) { _ = p.close() }, v.fast)
		}
	}
	return v, nil
}

// Close releases what the verifier keeps on its DB: on MySQL, the guard's
// prepared statement (see the package documentation, "Round trips"). It
// does not close the DB, and the verifier stays usable: its guard then
// runs unprepared, with one round trip more on go-sql-driver/mysql's
// default DSN. A Verifier that is dropped without Close releases the
// statement when it is garbage collected. Close is safe to call more than
// once, and on a nil *Verifier; it returns the error of closing the
// statement, if any. Call it once the verifier's calls have returned: on
// a *sql.Conn, a guard running at that moment may fail with database/sql's
// "statement is closed".
func (v *Verifier) Close() error {
	if v == nil {
		return nil
	}
	return v.fast.close()
}

// b returns v's scaffold; nil for a nil v.
func (v *Verifier) b() *scaffold.Base {
	if v == nil {
		return nil
	}
	return &v.base
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
func (v *Verifier) Claim(ctx context.Context, resource string, tok fence.Token) error {
	// A refusal is explained by a read of the row the guard locked; in one
	// transaction, a Move or a newer token cannot slip in between.
	return kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		return v.inTx(ctx, []scaffold.Claim{c}, nil)
	})
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
// Guard uses no connection but q's. On MySQL its usual statement runs
// prepared, in one round trip (see the package documentation, "Round
// trips"), when q is a transaction of the verifier's *sql.DB and the
// verifier has prepared it (its first Claim, WithTx or Exec does), or q is
// the verifier's *sql.Conn; otherwise through q.ExecContext. On MySQL,
// when the resource has no row
// yet, the guard inserts it in q's transaction; if that transaction rolls
// back while other guards of the resource wait for the row, InnoDB reports
// deadlocks (error 1213) to them. WithTx, Exec, Claim and Move avoid that by
// creating the row, committed on its own, before they begin.
func (v *Verifier) Guard(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	return kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		if isnil.Nil(q) {
			return invalid("Guard: nil Querier")
		}
		if c, ok := q.(*sql.Conn); ok && v.turn != nil && c == v.db.(*sql.Conn) {
			release, err := v.turn.take(ctx)
			if err != nil {
				return err
			}
			defer release()
		}
		return v.guard(ctx, q, c, false)
	})
}

// ensureRow makes sure, on MySQL, that resource has a committed row before
// a transaction guards it (see mysql/ensure.sql): on the verifier's DB, in
// a statement of its own, once per resource and process. The probe, a
// consistent read, comes first so that a caller's transaction that already
// holds the row's lock cannot make the insert wait for it.
func (v *Verifier) ensureRow(ctx context.Context, resource string) error {
	if !v.f.rowFirst || v.rows.has(resource) {
		return nil
	}
	var one int
	err := v.db.QueryRowContext(ctx, v.sql.probe, resource).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = v.db.ExecContext(ctx, v.sql.ensure, resource)
	}
	if err != nil {
		return fmt.Errorf("sqlverifier: guard %q: creating its row: %w", resource, v.noTable.Explain(err))
	}
	v.rows.add(resource)
	return nil
}

// guard runs the dialect's guard for c on q and, when it did not accept
// for certain, reads the row on q and judges (see scaffold.Guard). own says
// q is a transaction the verifier began on its DB.
func (v *Verifier) guard(ctx context.Context, q Querier, c scaffold.Claim, own bool) error {
	try := func() (bool, error) { return v.f.try(v, ctx, q, c, own) }
	return kind.Guard(c, try, func() (scaffold.Row, error) {
		var row scaffold.Row
		var seq int64
		var lock sql.NullString
		err := q.QueryRowContext(ctx, v.sql.refusal, c.Resource()).Scan(&seq, &row.Holder, &lock)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return scaffold.Row{}, err
		}
		row.Seq, row.Lock = uint64(seq), lock.String
		return row, nil
	})
}

// tryPostgres is the Postgres guard: one statement, a row back when
// accepted, none when refused (the row is then locked: read why).
func (v *Verifier) tryPostgres(ctx context.Context, q Querier, c scaffold.Claim, _ bool) (bool, error) {
	var got int64
	err := q.QueryRowContext(ctx, v.sql.guard, scaffold.GuardArgs(c)...).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlverifier: guard %q: %w", c.Resource(), v.noTable.Explain(err))
	}
	return true, nil
}

// tryMySQL is the MySQL guard: the fast path, an UPDATE of the row
// ensureRow created, then the full guard, whose affected rows tell only an
// update for certain. The fast path runs as a statement prepared once (see
// prepared) where q allows: one round trip, where the driver's default
// would prepare, run and close it.
func (v *Verifier) tryMySQL(ctx context.Context, q Querier, c scaffold.Claim, own bool) (bool, error) {
	resource, tok, seq := c.Resource(), c.Token(), int64(c.Token().Seq)
	args := []any{tok.Key, tok.Holder, seq, resource, tok.Key, seq, seq, tok.Holder}
	res, ran, err := v.fast.exec(ctx, q, own, args...)
	if !ran {
		res, err = q.ExecContext(ctx, v.sql.update, args...)
	}
	if err != nil {
		return false, fmt.Errorf("sqlverifier: guard %q: %w", resource, v.noTable.Explain(err))
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return true, nil
	}
	// Refused, a repeat, or no row (never made here, or deleted since):
	// the full guard tells, and the next begin makes sure of the row.
	v.rows.del(resource)
	res, err = q.ExecContext(ctx, v.sql.guard, scaffold.GuardArgs(c)...)
	if err != nil {
		return false, fmt.Errorf("sqlverifier: guard %q: %w", resource, v.noTable.Explain(err))
	}
	// 2: an existing row was changed, which only an accepted token does.
	n, err := res.RowsAffected()
	return err == nil && n == 2, nil
}

// Highest returns the high-water of resource: the highest Seq it accepted
// and the holder that presented it, or 0 and "" if it has none (never
// written, or moved to another lock since).
func (v *Verifier) Highest(ctx context.Context, resource string) (seq uint64, holder string, err error) {
	row, err := v.row(ctx, resource, "high-water")
	return row.Seq, row.Holder, err
}

// Lock returns the lock resource is bound to: the lock of the tokens it
// accepts, "" if none (never written, or written before locks were
// recorded).
func (v *Verifier) Lock(ctx context.Context, resource string) (string, error) {
	row, err := v.row(ctx, resource, "lock")
	return row.Lock, err
}

// row reads resource's high-water row: the checks, then the read on the
// verifier's DB.
func (v *Verifier) row(ctx context.Context, resource, what string) (scaffold.Row, error) {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return scaffold.Row{}, err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return scaffold.Row{}, err
	}
	release, err := v.turn.take(ctx)
	if err != nil {
		return scaffold.Row{}, err
	}
	defer release()
	var row scaffold.Row
	var s int64
	err = v.db.QueryRowContext(ctx, v.sql.highest, resource).Scan(&s, &row.Holder, &row.Lock)
	if errors.Is(err, sql.ErrNoRows) {
		return scaffold.Row{}, nil
	}
	if err != nil {
		return scaffold.Row{}, fmt.Errorf("sqlverifier: %s of %q: %w", what, resource, v.noTable.Explain(err))
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

// Dialect returns the verifier's dialect; 0 for a nil *Verifier.
func (v *Verifier) Dialect() Dialect {
	if v == nil {
		return 0
	}
	return v.d
}
