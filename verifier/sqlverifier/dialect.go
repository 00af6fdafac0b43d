package sqlverifier

import (
	"context"
	"embed"
	"strings"
	"unicode"
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
	unit     string // maxIdent, in words
	// files are the dialect's own SQL files, under its directory; more
	// fills in the rest.
	files []string
	more  func(table string, st map[string]string)
	// try runs the guard: true when it accepted for certain.
	try func(v *Verifier, ctx context.Context, q Querier, c scaffold.Claim, own bool) (bool, error)
	// rowFirst: a committed row is made before a transaction guards the
	// resource (MySQL, see ensureRow); else Move makes it in its
	// transaction.
	rowFirst bool
}

var flavors = map[Dialect]*flavor{
	MySQL: {
		name: observe.VerifierMySQL, quote: "`", maxIdent: 64, length: utf8.RuneCountInString, unit: "64 characters",
		files:    []string{"guard", "check", "highest", "ensure", "move", "probe", "update", "reset", "bound", "unbound"},
		more:     func(_ string, st map[string]string) { st["refusal"] = st["check"] }, // a locking read: REPEATABLE READ
		try:      (*Verifier).tryMySQL,
		rowFirst: true,
	},
	Postgres: {
		name: observe.VerifierPostgres, quote: `"`, maxIdent: 63, length: func(s string) int { return len(s) }, unit: "63 bytes",
		files: []string{"check", "ensure", "move", "bound"},
		more: func(table string, st map[string]string) { // pgverifier's guard and read
			st["guard"] = scaffold.PostgresGuard(table)
			st["highest"] = scaffold.PostgresHighest(table)
			st["refusal"] = st["highest"]
			st["reset"] = scaffold.PostgresReset(table)
		},
		try: (*Verifier).tryPostgres,
	},
}

// identOK reports why part cannot be one part of a table name, or "": it
// must not be empty, must be valid UTF-8 without control characters
// (Unicode Cc: NUL, newline, tab, ...; a newline would end a "--" comment
// in the middle of the name), and no longer than the server keeps
// (PostgreSQL truncates past 63 bytes, silently naming another table;
// MySQL refuses more than 64 characters).
func (f *flavor) identOK(part string) string {
	switch {
	case part == "":
		return "it is empty"
	case !utf8.ValidString(part):
		return "it is not valid UTF-8"
	case strings.ContainsFunc(part, unicode.IsControl):
		return "it has a control character"
	case f.length(part) > f.maxIdent:
		return "it is longer than " + f.unit
	}
	return ""
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
	update  string // MySQL: the guard's fast path (see prepared)
	reset   string
	bound   string // bounds a transaction (see Verifier.begin)
	unbound string // MySQL: ends the bound, after the transaction
}

func (f *flavor) statements(d Dialect, table string) statements {
	st := map[string]string{}
	for _, name := range f.files {
		b, err := sqlFiles.ReadFile(d.String() + "/" + name + ".sql")
		if err != nil {
			panic("sqlverifier: missing embedded " + d.String() + "/" + name + ".sql") // a build error
		}
		st[name] = strings.ReplaceAll(uncomment(string(b)), "{{table}}", table)
	}
	f.more(table, st)
	return statements{guard: st["guard"], refusal: st["refusal"], check: st["check"], highest: st["highest"],
		ensure: st["ensure"], move: st["move"], probe: st["probe"], update: st["update"], reset: st["reset"],
		bound: st["bound"], unbound: st["unbound"]}
}

// uncomment drops the comment lines ("--" first on the line) of an embedded
// SQL file, before the table name goes in: they need not travel, and what
// they say of {{table}} must not become SQL. (The files have no other
// comments, and no "--" inside a string.)
func uncomment(file string) string {
	var b strings.Builder
	for line := range strings.Lines(file) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return strings.TrimSpace(b.String())
}
