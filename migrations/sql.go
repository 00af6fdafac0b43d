package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock/internal/isnil"
)

// MySQLFS holds the MySQL/MariaDB migration files, under "mysql/", named
// like those in [FS]. With golang-migrate: iofs.New(migrations.MySQLFS,
// "mysql").
//
//go:embed mysql/*.sql
var MySQLFS embed.FS

// mysqlLock is the named lock (GET_LOCK) that serializes concurrent
// ApplySQL calls on one MySQL server.
const mysqlLock = "fencelock/migrations"

// Conner hands out one connection of a pool. *sql.DB satisfies it.
type Conner interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

// UpFor returns the up migrations of dialect, in version order: those in
// [FS] for [Postgres] (the same as [Up]), those in [MySQLFS] for
// [MySQL].
func UpFor(dialect Dialect) ([]Migration, error) {
	switch dialect {
	case Postgres:
		return Up()
	case MySQL:
		return upIn(MySQLFS, "mysql")
	}
	return nil, fmt.Errorf("migrations: unknown dialect %v", dialect)
}

func upIn(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		m := upFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", e.Name(), err)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// ApplySQL is [Apply] through database/sql, for sqlverifier: it runs every
// up migration of dialect that is not yet recorded in [Table], and records
// it. Concurrent calls, from any number of processes, wait for each other,
// so it is idempotent and safe to call at every start-up. It returns the
// migrations it ran.
//
// On PostgreSQL it runs the files of [FS] in one transaction under the
// same advisory lock as Apply (the two can be mixed). On MySQL and MariaDB,
// whose DDL commits at once, it holds the named lock
// GET_LOCK('fencelock/migrations') on one connection and records each file
// after it ran; the files are written to be run again after a crash
// part-way.
func ApplySQL(ctx context.Context, db Conner, dialect Dialect) ([]Migration, error) {
	if isnil.Nil(db) || ctx == nil {
		return nil, errors.New("migrations: ApplySQL: nil DB or context")
	}
	ms, err := UpFor(dialect)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()
	if dialect == Postgres {
		return applyPostgres(ctx, conn, ms)
	}
	return applyMySQL(ctx, conn, ms)
}

func applyPostgres(ctx context.Context, conn *sql.Conn, ms []Migration) ([]Migration, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("migrations: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("migrations: lock: %w", err)
	}
	table := `"` + Table + `"`
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    bigint      PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrations: create %s: %w", Table, err)
	}
	var ran []Migration
	for _, m := range ms {
		var done bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE version = $1)`, int64(m.Version)).Scan(&done)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", m.Name, err)
		}
		if done {
			continue
		}
		// No arguments: pgx's stdlib driver sends the file with the simple
		// protocol, so it may hold several statements.
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, int64(m.Version), m.Name); err != nil {
			return nil, fmt.Errorf("migrations: record %s: %w", m.Name, err)
		}
		ran = append(ran, m)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("migrations: commit: %w", err)
	}
	return ran, nil
}

func applyMySQL(ctx context.Context, conn *sql.Conn, ms []Migration) (_ []Migration, err error) {
	if err := mysqlGetLock(ctx, conn); err != nil {
		return nil, err
	}
	defer func() {
		// A session lock outlives Close, which returns the connection to the
		// pool: if it cannot be released, the connection is discarded, and
		// the server releases the lock when it goes. Once ctx has ended the
		// connection is discarded at once: no call outlives its context.
		if ctx.Err() != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := conn.ExecContext(rctx, "SELECT RELEASE_LOCK(?)", mysqlLock); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	table := "`" + Table + "`"
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version    BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		name       VARCHAR(255)    NOT NULL,
		applied_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("migrations: create %s: %w", Table, err)
	}
	var ran []Migration
	for _, m := range ms {
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE version = ?`, m.Version).Scan(&n); err != nil {
			return nil, fmt.Errorf("migrations: %s: %w", m.Name, err)
		}
		if n > 0 {
			continue
		}
		for i, stmt := range statements(m.SQL) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return nil, fmt.Errorf("migrations: %s, statement %d: %w", m.Name, i+1, err)
			}
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("migrations: record %s: %w", m.Name, err)
		}
		ran = append(ran, m)
	}
	return ran, nil
}

// mysqlGetLock waits for the named lock in steps of a second, so that it
// stops waiting when ctx ends.
func mysqlGetLock(ctx context.Context, conn *sql.Conn) error {
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", mysqlLock).Scan(&got); err != nil {
			return fmt.Errorf("migrations: lock: %w", err)
		}
		switch {
		case got.Valid && got.Int64 == 1:
			return nil
		case !got.Valid:
			return errors.New("migrations: lock: GET_LOCK returned NULL")
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("migrations: lock: %w", err)
		}
	}
}

// statements splits a MySQL migration file into statements: each ends with
// ";" at the end of a line; lines starting with "--" are comments. The
// files in MySQLFS are written this way, because the MySQL driver runs one
// statement per call unless the DSN allows multiStatements.
func statements(file string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(file, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
