package migrations

import (
	"context"
	"embed"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// FS holds the migration files: NNNNNN_name.up.sql and NNNNNN_name.down.sql.
//
//go:embed *.sql
var FS embed.FS

// Table is the table in which Apply records the versions it has applied.
const Table = "fencelock_migrations"

// lockID is the transaction-scoped advisory lock that serializes concurrent
// Apply calls: pg_advisory_xact_lock(lockID). It is the first 8 bytes of
// sha256("fencelock/migrations"), so it is unlikely to collide with an
// application's own advisory locks.
const lockID int64 = 0x0b080993e43dcbec

// Beginner starts a transaction. *pgx.Conn, *pgxpool.Pool and pgx.Tx (which
// begins a savepoint) all satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migration is one up migration in FS.
type Migration struct {
	Version uint64 // the NNNNNN prefix
	Name    string // the file name, e.g. "000001_fence_tokens.up.sql"
	SQL     string
}

// upFile is golang-migrate's file name pattern, restricted to up files.
var upFile = regexp.MustCompile(`^([0-9]+)_(.*)\.up\.sql$`)

// Up returns the up migrations in FS (PostgreSQL's), in version order.
func Up() ([]Migration, error) { return upIn(FS, ".") }

// Apply runs, in one transaction, every up migration in FS that is not yet
// recorded in [Table], and records it. Concurrent calls wait for each other
// on an advisory lock, so Apply is idempotent and safe to call from every
// process at start-up. It returns the migrations it ran.
func Apply(ctx context.Context, db Beginner) ([]Migration, error) {
	ms, err := Up()
	if err != nil {
		return nil, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("migrations: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{Table}.Sanitize()+` (
		version    bigint      PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrations: create %s: %w", Table, err)
	}
	var ran []Migration
	for _, m := range ms {
		var done bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{Table}.Sanitize()+` WHERE version = $1)`,
			int64(m.Version)).Scan(&done)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", m.Name, err)
		}
		if done {
			continue
		}
		// No arguments: pgx sends the file with the simple protocol, so it
		// may hold several statements.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{Table}.Sanitize()+` (version, name) VALUES ($1, $2)`,
			int64(m.Version), m.Name); err != nil {
			return nil, fmt.Errorf("migrations: record %s: %w", m.Name, err)
		}
		ran = append(ran, m)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrations: commit: %w", err)
	}
	return ran, nil
}
