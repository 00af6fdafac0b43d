package sqlverifier

import (
	"context"
	"embed"
	"strings"
	"unicode/utf8"

	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

// Dialect is the SQL flavour of the database a [Verifier] talks to. It
// picks the SQL files, the placeholders and the identifier quoting; the
// driver is the caller's choice. It is package migrations' type, so the
// same value creates the table ([migrations.ApplySQL]).
type Dialect = migrations.Dialect

const (
	// MySQL is MySQL (8.0.16 or later) and MariaDB (10.5 or later), through
	// github.com/go-sql-driver/mysql. The guard is an UPDATE of the
	// resource's row with the acceptance rule in its WHERE; when it
	// changes no row, an INSERT ... ON DUPLICATE KEY UPDATE and a locking
	// read of the row tell why.
	MySQL = migrations.MySQL
	// Postgres is PostgreSQL through a database/sql driver, such as
	// github.com/jackc/pgx/v5/stdlib. The guard is package pgverifier's
	// statement, INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING,
	// and a refusal is read as pgverifier reads it. (With pgx itself,
	// package pgverifier needs no database/sql.)
	Postgres = migrations.Postgres
)

// flavor is what differs between the dialects, picked once by New: the
// SQL, the identifier rules, and the guard's statements.
type flavor struct {
	// name is the verifier's name in hook events.
	name string
	// quote is the identifier quote; maxIdent the longest identifier
	// part, counted by length.
	quote    string
	maxIdent int
	length   func(string) int
	// files are the dialect's own SQL files, under its directory; more
	// fills in the rest.
	files []string
	more  func(table string, st map[string]string)
	// try runs the guard: true when it accepted for certain.
	try func(v *Verifier, ctx context.Context, q Querier, c scaffold.Claim) (bool, error)
	// rowFirst: a committed row is made before a transaction guards the
	// resource (MySQL, see ensureRow); else Move makes it in its
	// transaction.
	rowFirst bool
}

var flavors = map[Dialect]*flavor{
	MySQL: {
		name: observe.VerifierMySQL, quote: "`", maxIdent: 64, length: utf8.RuneCountInString,
		files:    []string{"guard", "check", "highest", "ensure", "move", "probe", "update"},
		more:     func(_ string, st map[string]string) { st["refusal"] = st["check"] }, // a locking read: REPEATABLE READ
		try:      (*Verifier).tryMySQL,
		rowFirst: true,
	},
	Postgres: {
		name: observe.VerifierPostgres, quote: `"`, maxIdent: 63, length: func(s string) int { return len(s) },
		files: []string{"check", "ensure", "move"},
		more: func(table string, st map[string]string) { // pgverifier's guard and read
			st["guard"] = scaffold.PostgresGuard(table)
			st["highest"] = scaffold.PostgresHighest(table)
			st["refusal"] = st["highest"]
		},
		try: (*Verifier).tryPostgres,
	},
}

// identOK reports whether part can be one part of a table name: not empty,
// valid UTF-8 without NUL, and no longer than the server keeps
// (PostgreSQL truncates past 63 bytes, silently naming another table;
// MySQL refuses more than 64 characters).
func (f *flavor) identOK(part string) bool {
	return part != "" && strings.IndexByte(part, 0) < 0 && utf8.ValidString(part) && f.length(part) <= f.maxIdent
}

// quoteIdent quotes one identifier: "x" for PostgreSQL, `x` for MySQL,
// with the quote character doubled inside.
func (f *flavor) quoteIdent(part string) string {
	return f.quote + strings.ReplaceAll(part, f.quote, f.quote+f.quote) + f.quote
}

//go:embed mysql/*.sql postgres/*.sql
var sqlFiles embed.FS

// statements are a dialect's SQL, with the table name filled in.
type statements struct {
	guard   string // the guard
	refusal string // the row after a guard: seq, holder, lock
	check   string // the row, locked: seq, holder, lock
	highest string // seq, holder, lock
	ensure  string // the row, made if missing
	move    string
	probe   string // MySQL: does the row exist
	update  inline // MySQL: the guard's fast path, sent with literals
}

func (f *flavor) statements(d Dialect, table string) statements {
	st := map[string]string{}
	for _, name := range f.files {
		b, err := sqlFiles.ReadFile(d.String() + "/" + name + ".sql")
		if err != nil {
			panic("sqlverifier: missing embedded " + d.String() + "/" + name + ".sql") // a build error
		}
		st[name] = strings.ReplaceAll(string(b), "{{table}}", table)
	}
	f.more(table, st)
	return statements{guard: st["guard"], refusal: st["refusal"], check: st["check"], highest: st["highest"],
		ensure: st["ensure"], move: st["move"], probe: st["probe"], update: newInline(st["update"])}
}
