#!/usr/bin/env bash
# Installs what the tests, examples and bench need besides Go: redis-server,
# the PostgreSQL server binaries (initdb, pg_ctl, postgres) and the MariaDB
# ones (mariadb-install-db, mariadbd). Nothing is started here and no system
# service is used: the project's own code starts throwaway servers on free
# loopback ports.
set -euo pipefail

have_pg() {
	[ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/initdb" ] && return 0
	command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
	command -v initdb >/dev/null 2>&1
}

have_mariadb() {
	have() { [ -x "${MARIADB_BIN:-/nonexistent}/$1" ] || command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
	have mariadbd && have mariadb-install-db
}

missing=()
command -v go >/dev/null 2>&1 || { echo "deps: Go is not installed; see https://go.dev/doc/install" >&2; exit 1; }
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
have_pg || missing+=(postgresql)
have_mariadb || missing+=(mariadb-server)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "deps: missing ${missing[*]}; run this, then try again:" >&2
	echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian packages start system services; fencelock never uses them (its
# tests start their own servers on free ports, never 5432 or 3306).
