package scaffold

import (
	_ "embed"
	"strings"

	"github.com/fencelock/fencelock/fence"
)

var (
	//go:embed postgres/guard.sql
	postgresGuard string
	//go:embed postgres/highest.sql
	postgresHighest string
	//go:embed postgres/reset.sql
	postgresReset string
)

// PostgresGuard returns the PostgreSQL guard statement on table (quoted):
// $1 resource, $2 seq, $3 holder, $4 the token's lock; one row back when
// the token is accepted, none when refused. pgverifier and sqlverifier's
// Postgres dialect both run it.
func PostgresGuard(table string) string { return strings.ReplaceAll(postgresGuard, "{{table}}", table) }

// PostgresHighest returns the PostgreSQL read of one resource's row on
// table (quoted): $1 resource; seq, holder and lock (” for none). It
// explains a refused guard ([Row]) and answers Highest.
func PostgresHighest(table string) string {
	return strings.ReplaceAll(postgresHighest, "{{table}}", table)
}

// PostgresReset returns the PostgreSQL reset of one resource's row on
// table (quoted): $1 resource, $2 seq, $3 holder, $4 lock. pgverifier and
// sqlverifier's Postgres dialect both run it.
func PostgresReset(table string) string { return strings.ReplaceAll(postgresReset, "{{table}}", table) }

// ResetArgs are the reset's parameters, in the order of PostgresReset (and
// of sqlverifier's MySQL reset).
func ResetArgs(resource string, to fence.Token) []any {
	return []any{resource, int64(to.Seq), to.Holder, to.Key}
}

// GuardArgs are the guard's parameters for c, in the order of
// PostgresGuard (and of sqlverifier's MySQL guard).
func GuardArgs(c Claim) []any {
	return []any{c.resource, int64(c.tok.Seq), c.tok.Holder, c.tok.Key}
}
