package scaffold

import (
	"errors"
	"fmt"
	"strings"
)

// NoTable is what to do when the verifier's table is missing. Table is its
// name as the SQL says it (quoted); Apply is the call that creates the
// default table ("migrations.Apply"); Default says Table is the default.
type NoTable struct {
	Table   string
	Apply   string
	Default bool
}

// Explain returns err unchanged, unless err says that a table does not
// exist (PostgreSQL's SQLSTATE 42P01, go-sql-driver/mysql's error 1146):
// then an error whose text says what to run, wrapping err. Call it only on
// the errors of the verifier's own statements, which name no other table.
func (n NoTable) Explain(err error) error {
	if err == nil || !missingTable(err) {
		return err
	}
	if n.Default {
		return fmt.Errorf("the table %s does not exist: run %s first (migration 000001_fence_tokens creates it): %w", n.Table, n.Apply, err)
	}
	return fmt.Errorf("the table %s does not exist: create it as package migrations creates fence_tokens: %w", n.Table, err)
}

// missingTable reports whether err says that a table does not exist.
func missingTable(err error) bool {
	var pg interface{ SQLState() string } // *pgconn.PgError
	if errors.As(err, &pg) && pg.SQLState() == "42P01" {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), "Error 1146 (") { // *mysql.MySQLError: ER_NO_SUCH_TABLE
			return true
		}
	}
	return false
}
