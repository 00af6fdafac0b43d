package migrations

import "strconv"

// Dialect is the SQL flavour of a database: it picks the migration files
// ([UpFor], [ApplySQL]) and, in package sqlverifier (whose Dialect is this
// type), the verifier's SQL. The driver is the caller's choice.
type Dialect int

const (
	// MySQL is MySQL (8.0.16 or later) and MariaDB (10.5 or later), through
	// github.com/go-sql-driver/mysql; its files are in [MySQLFS].
	MySQL Dialect = iota + 1
	// Postgres is PostgreSQL, through a database/sql driver such as
	// github.com/jackc/pgx/v5/stdlib; its files are in [FS].
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
