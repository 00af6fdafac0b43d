package sqlverifier_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier/internal/pausetest"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// mysqlDSN and pgDSN are the throwaway MariaDB and PostgreSQL that TestMain
// starts for the package, with the migrations applied. Tests keep apart by
// using their own resources and tables.
var mysqlDSN, pgDSN string

func TestMain(m *testing.M) {
	pausetest.Child(holdSQL) // a holder process of paused_test.go
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	maria, err := testenv.StartMariaDB(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer maria.Close()
	pg, err := testenv.StartPostgres(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pg.Close()
	mysqlDSN, pgDSN = maria.DSN(), pg.DSN()
	for _, a := range []struct {
		driver, dsn string
		d           sqlverifier.Dialect
	}{{"mysql", mysqlDSN, sqlverifier.MySQL}, {"pgx", pgDSN, sqlverifier.Postgres}} {
		db, err := sql.Open(a.driver, a.dsn)
		if err == nil {
			_, err = migrations.ApplySQL(ctx, db, a.d)
			db.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// target is one database the tests run against.
type target struct {
	name   string
	d      sqlverifier.Dialect
	driver string
	dsn    string
}

// targets: MariaDB with the driver's defaults (server-side prepared
// statements, affected rows counted as changed, REPEATABLE READ), MariaDB
// with clientFoundRows and interpolateParams (found rows, one round trip
// per statement), MariaDB under READ COMMITTED (whose UPDATE lets go of
// rows its WHERE refuses), and PostgreSQL through pgx's stdlib driver.
func targets() []target {
	return []target{
		{"mysql", sqlverifier.MySQL, "mysql", mysqlDSN},
		{"mysql-foundrows", sqlverifier.MySQL, "mysql", mysqlDSN + "?clientFoundRows=true&interpolateParams=true"},
		{"mysql-readcommitted", sqlverifier.MySQL, "mysql", mysqlDSN + "?tx_isolation=%27READ-COMMITTED%27"},
		{"postgres", sqlverifier.Postgres, "pgx", pgDSN},
	}
}

// each runs fn as a subtest for every target.
func each(t *testing.T, fn func(t *testing.T, tg target)) {
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
	}
}

// open returns a pool closed when the test ends.
func (tg target) open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open(tg.driver, tg.dsn)
	require.NoError(t, err)
	db.SetMaxIdleConns(40)
	t.Cleanup(func() { db.Close() })
	return db
}

// conn returns one connection of a new pool, closed when the test ends.
func (tg target) conn(t testing.TB) *sql.Conn {
	t.Helper()
	c, err := tg.open(t).Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (tg target) verifier(t testing.TB, db sqlverifier.DB, opts ...sqlverifier.Option) *sqlverifier.Verifier {
	t.Helper()
	v, err := sqlverifier.New(db, tg.d, opts...)
	require.NoError(t, err)
	return v
}

// q rewrites the ? placeholders of query into $1, $2, ... for PostgreSQL.
func (tg target) q(query string) string {
	if tg.d != sqlverifier.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ident quotes a name for the target.
func (tg target) ident(name string) string {
	if tg.d == sqlverifier.Postgres {
		return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// createLog creates a table in which fenced writes append their token; its
// auto-increment id gives the order in which the writes were applied (the
// guard's row lock serializes writers of one resource until they commit).
func (tg target) createLog(t testing.TB, db *sql.DB, name string) string {
	t.Helper()
	table := tg.ident(strings.ReplaceAll(name+"_"+tg.name, "-", "_"))
	ddl := `CREATE TABLE ` + table + ` (id BIGINT AUTO_INCREMENT PRIMARY KEY, resource VARBINARY(1024) NOT NULL,
		seq BIGINT NOT NULL, holder VARBINARY(64) NOT NULL, KEY (resource)) ENGINE=InnoDB`
	if tg.d == sqlverifier.Postgres {
		ddl = `CREATE TABLE ` + table + ` (id bigserial PRIMARY KEY, resource text NOT NULL, seq bigint NOT NULL, holder text NOT NULL)`
	}
	_, err := db.ExecContext(t.Context(), `DROP TABLE IF EXISTS `+table)
	require.NoError(t, err)
	_, err = db.ExecContext(t.Context(), ddl)
	require.NoError(t, err)
	return table
}

func (tg target) readLog(ctx context.Context, db *sql.DB, table, resource string) ([]fence.Token, error) {
	rows, err := db.QueryContext(ctx, tg.q(`SELECT seq, holder FROM `+table+` WHERE resource = ? ORDER BY id`), resource)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fence.Token
	for rows.Next() {
		var seq int64
		var tok fence.Token
		if err := rows.Scan(&seq, &tok.Holder); err != nil {
			return nil, err
		}
		tok.Seq = uint64(seq)
		out = append(out, tok)
	}
	return out, rows.Err()
}

// row reads the stored row of resource: seq, holder and lock ("" for NULL);
// ok is false when there is none.
func (tg target) row(t testing.TB, q sqlverifier.Querier, resource string) (seq uint64, holder, lock string, ok bool) {
	t.Helper()
	var s int64
	var l sql.NullString
	err := q.QueryRowContext(t.Context(), tg.q(`SELECT seq, holder, lock_key FROM fence_tokens WHERE resource = ?`), resource).Scan(&s, &holder, &l)
	if err == sql.ErrNoRows {
		return 0, "", "", false
	}
	require.NoError(t, err)
	return uint64(s), holder, l.String, true
}

func requireHighest(t testing.TB, v *sqlverifier.Verifier, res string, seq uint64, holder string) {
	t.Helper()
	gotSeq, gotHolder, err := v.Highest(t.Context(), res)
	require.NoError(t, err)
	require.Equal(t, seq, gotSeq, "high-water seq")
	require.Equal(t, holder, gotHolder, "high-water holder")
}

// tok returns a token of lock key.
func tok(key string, seq uint64, holder string) fence.Token {
	return fence.Token{Key: key, Seq: seq, Holder: holder}
}

// TestTargetsIsolation checks that each MySQL target runs at the isolation
// level its name says, so the suite covers both.
func TestTargetsIsolation(t *testing.T) {
	for _, tg := range targets() {
		if tg.d != sqlverifier.MySQL {
			continue
		}
		var level string
		require.NoError(t, tg.conn(t).QueryRowContext(t.Context(), `SELECT @@tx_isolation`).Scan(&level))
		want := "REPEATABLE-READ"
		if tg.name == "mysql-readcommitted" {
			want = "READ-COMMITTED"
		}
		assert.Equal(t, want, level, tg.name)
	}
}
