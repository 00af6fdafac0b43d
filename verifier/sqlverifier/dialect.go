package sqlverifier

import (
	"embed"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Dialect is the SQL flavour of the database a [Verifier] talks to. It
// picks the SQL files, the placeholders and the identifier quoting; the
// driver is the caller's choice. Package migrations takes the same value to
// create the table.
type Dialect int

const (
	// MySQL is MySQL (8.0.16 or later) and MariaDB (10.5 or later), through
	// github.com/go-sql-driver/mysql. The guard is an UPDATE of the
	// resource's row with the acceptance rule in its WHERE; when it
	// changes no row, an INSERT ... ON DUPLICATE KEY UPDATE and a locking
	// read of the row tell why.
	MySQL Dialect = iota + 1
	// Postgres is PostgreSQL through a database/sql driver, such as
	// github.com/jackc/pgx/v5/stdlib. The guard is the INSERT ... ON
	// CONFLICT DO UPDATE ... WHERE ... RETURNING of package pgverifier,
	// extended with the lock binding. (With pgx itself, package pgverifier
	// needs no database/sql.)
	Postgres
)

// String returns "mysql" or "postgres".
func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case Postgres:
		return "postgres"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// verifierName is the verifier's name in hook events.
func (d Dialect) verifierName() string {
	if d == Postgres {
		return "postgres-sql"
	}
	return "mysql"
}

// identOK reports whether part can be one part of a table name: not empty,
// valid UTF-8 without NUL, and no longer than the server keeps
// (PostgreSQL truncates past 63 bytes, silently naming another table;
// MySQL refuses more than 64 characters).
func (d Dialect) identOK(part string) bool {
	if part == "" || strings.IndexByte(part, 0) >= 0 || !utf8.ValidString(part) {
		return false
	}
	if d == Postgres {
		return len(part) <= 63
	}
	return utf8.RuneCountInString(part) <= 64
}

// quote quotes one identifier: "x" for PostgreSQL, `x` for MySQL, with the
// quote character doubled inside.
func (d Dialect) quote(part string) string {
	q := "`"
	if d == Postgres {
		q = `"`
	}
	return q + strings.ReplaceAll(part, q, q+q) + q
}

//go:embed mysql/*.sql postgres/*.sql
var sqlFiles embed.FS

// statements are a dialect's SQL, with the table name filled in.
type statements struct {
	guard, check, highest, ensure, move string
	probe, update                       string // MySQL only
}

func (d Dialect) statements(table string) statements {
	load := func(name string) string {
		b, err := sqlFiles.ReadFile(d.String() + "/" + name + ".sql")
		if err != nil {
			panic("sqlverifier: missing embedded " + d.String() + "/" + name + ".sql") // a build error
		}
		return strings.ReplaceAll(string(b), "{{table}}", table)
	}
	st := statements{
		guard:   load("guard"),
		check:   load("check"),
		highest: load("highest"),
		ensure:  load("ensure"),
		move:    load("move"),
	}
	if d == MySQL {
		st.probe = load("probe")
		st.update = load("update")
	}
	return st
}
