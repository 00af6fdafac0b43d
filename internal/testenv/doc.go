// Package testenv starts real, throwaway Redis, PostgreSQL and MariaDB servers for
// fencelock's tests, examples and benchmarks.
//
// Every server runs as a child process in its own temporary directory and
// listens on a free port on 127.0.0.1, so tests never collide with each other
// or with system services on 6379/5432. Children are started with
// Pdeathsig=SIGKILL in their own process group: if the test binary is killed,
// the servers die with it.
//
// There are two ways in:
//
//   - From tests, [NewRedis], [NewRedisN], [NewReplicated], [NewCluster] and
//     [NewPostgres], [NewMariaDB] take a [testing.TB], fail the test on error and stop the
//     server in t.Cleanup, even when the test fails.
//   - From non-test code (TestMain, `go run ./examples/x`, bench),
//     [StartRedis], [StartRedisN], [StartReplicated], [StartCluster] and
//     [StartPostgres], [StartMariaDB] return an error and a value whose Close must be called.
//
// [RedisOrStart], [PostgresOrStart] and [MariaDBOrStart] use REDIS_URL /
// DATABASE_URL / MYSQL_DSN when set (see [RedisURL], [DatabaseURL]) and start a throwaway server otherwise, so a
// newcomer's first run needs no configuration.
//
// A Redis can take TLS alone, or mutual TLS (RedisOptions.TLS), with a CA and
// certificates that openssl makes in its directory ([Redis.TLS]).
//
// Servers can be stopped, killed, paused and restarted on the same port and
// data directory, which is what the durability tests need: a Redis without
// persistence forgets its keys on restart, a replica can be promoted, a
// PostgreSQL killed in immediate mode recovers from its WAL.
//
// The Redis servers are redis-server, or the binary that $FENCELOCK_REDIS_SERVER
// ([ServerEnv]) names: FENCELOCK_REDIS_SERVER=valkey-server runs every test
// that starts a Redis on Valkey instead (scripts/test.sh does so for the lease
// and recipe packages). REDIS_URL, where set, still wins.
//
// When redis-server or the PostgreSQL binaries are missing, the error wraps
// [ErrNotInstalled] and says how to install them (scripts/deps.sh, or
// `apt-get install -y redis-server postgresql mariadb-server`). PostgreSQL binaries are looked
// up in $PG_BIN, then `pg_config --bindir`, then the newest
// /usr/lib/postgresql/*/bin, then PATH. PostgreSQL refuses to run as root, so
// when the process runs as root, initdb and postgres run as the "postgres" OS
// user.
//
// This package is for testing only; it is not part of fencelock's API and it
// tunes the servers for speed (no Redis persistence by default, fsync=off for
// PostgreSQL), never for safety.
package testenv
