// Package migrations holds the SQL schema of fencelock's SQL verifiers as
// numbered up/down files: PostgreSQL's (package pgverifier, and
// sqlverifier.Postgres) embedded in [FS], MySQL's and MariaDB's
// (sqlverifier.MySQL) in [MySQLFS].
//
//	applied, err := migrations.Apply(ctx, pool)                  // PostgreSQL through pgx
//	applied, err := migrations.ApplySQL(ctx, db, migrations.MySQL) // database/sql: MySQL, MariaDB
//
// The files follow golang-migrate's naming (NNNNNN_name.up.sql and
// NNNNNN_name.down.sql, at the root of FS and under "mysql/" in MySQLFS),
// so they can be run by golang-migrate through its iofs source
// (iofs.New(migrations.MySQLFS, "mysql") for MySQL):
//
//	src, err := iofs.New(migrations.FS, ".")
//	m, err := migrate.NewWithSourceInstance("iofs", src, "postgres://...&x-migrations-table=fencelock_schema_migrations")
//	err = m.Up()
//
// Give golang-migrate its own migrations table (x-migrations-table) so these
// versions do not mix with the application's. Or copy the files into the
// application's own migration tool.
//
// Without a migration tool, [Apply] (or [ApplySQL], for either dialect)
// runs the up files that have not run yet, and records them in the table
// fencelock_migrations. It is safe to call at every start-up, from many
// processes at once: the calls take turns on a lock in the database. That
// covers these files only; an application's own CREATE TABLE IF NOT EXISTS
// is not safe to run from two processes at once on PostgreSQL (the README's
// programs put theirs under an advisory lock).
//
// The schema creates the table fence_tokens. A verifier configured with
// another table name needs that table created the same way, under the
// other name.
package migrations
