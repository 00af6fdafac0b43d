#!/usr/bin/env bash
# Installs what the tests, examples and bench need besides Go: redis-server,
# the PostgreSQL server binaries (initdb, pg_ctl, postgres) and the MariaDB
# ones (mariadb-install-db, mariadbd). Nothing is started here and no system
# service is used: the project's own code starts throwaway servers on free
# loopback ports.
#
# With --valkey it also installs valkey-server (scripts/test.sh runs the
# lease and recipe tests against it too). Debian bookworm has it only in its
# backports suite: the script adds that suite (from the machine's own Debian
# mirror) when no source names it, and installs from it. The package's own
# service is neither started nor left enabled, so it never takes 6379 from a
# Redis there. Where no package has it, the script exits 3, after installing
# the rest.
set -euo pipefail

want_valkey=0
for a in "$@"; do
	case $a in
	--valkey) want_valkey=1 ;;
	*) echo "usage: scripts/deps.sh [--valkey]" >&2; exit 2 ;;
	esac
done

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

# has_suite reports whether an apt source (one-line or deb822) names suite.
has_suite() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] && grep -Eqs "^[^#]*[[:space:]]$1([[:space:]]|\$)" "$f" && return 0
	done
	return 1
}

missing=()
command -v go >/dev/null 2>&1 || { echo "deps: Go is not installed; see https://go.dev/doc/install" >&2; exit 1; }
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
have_pg || missing+=(postgresql)
have_mariadb || missing+=(mariadb-server)
valkey=0
[ $want_valkey -eq 1 ] && ! command -v valkey-server >/dev/null 2>&1 && valkey=1
[ ${#missing[@]} -eq 0 ] && [ $valkey -eq 0 ] && exit 0

[ $valkey -eq 1 ] && all=("${missing[@]}" valkey-server) || all=("${missing[@]}")
# cannot is the exit code when nothing can be installed here: 3 when only
# valkey-server is missing, so that scripts/test.sh can go on without it.
cannot=1
[ ${#missing[@]} -eq 0 ] && cannot=3
echo "deps: installing ${all[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "deps: missing ${all[*]}; run this as root, or with sudo: scripts/deps.sh $*" >&2
	[ ${#missing[@]} -gt 0 ] &&
		echo "  (or: sudo apt-get update && sudo apt-get install -y ${missing[*]})" >&2
	exit $cannot
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing ${all[*]} and no apt-get here; install them with your package manager" >&2
	exit $cannot
fi
export DEBIAN_FRONTEND=noninteractive

# Keep the packages' services from starting during the install (a Valkey
# would compete with a running Redis for 6379): invoke-rc.d and
# deb-systemd-invoke ask policy-rc.d, and 101 means "not now". fencelock never
# uses a system service: its tests start their own servers on free ports,
# never 6379, 5432 or 3306.
policy=/usr/sbin/policy-rc.d
if [ ! -e $policy ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee $policy >/dev/null
	"${sudo[@]}" chmod 755 $policy
	trap '"${sudo[@]}" rm -f '$policy EXIT
fi

"${sudo[@]}" apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ $valkey -eq 1 ] || exit 0

# has_candidate reports whether apt can install package $1 (read whole: a
# pipe into grep -q would fail under pipefail when apt-cache gets SIGPIPE).
has_candidate() {
	local out
	out=$(apt-cache policy "$1" 2>/dev/null) || return 1
	[[ $out =~ Candidate:\ [^\(] ]]
}

# On Debian, valkey-server may be only in the release's backports suite
# (bookworm): add that suite, from the mirror the machine already uses for
# its release, when no source names it, and install from it.
target=()
codename=$(. /etc/os-release 2>/dev/null && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-}" || true)
if [ -n "$codename" ]; then
	backports=$codename-backports
	if ! has_candidate valkey-server && ! has_suite "$backports"; then
		mirror=$(apt-cache policy | awk -v s="$codename/main" '$3 == s && m == "" { m = $2 } END { print m }')
		[ -n "$mirror" ] || { echo "deps: no apt source for Debian $codename; cannot add $backports" >&2; exit 1; }
		echo "deps: adding the $backports suite ($mirror) for valkey-server" >&2
		{
			echo "Types: deb"
			echo "URIs: $mirror"
			echo "Suites: $backports"
			echo "Components: main"
			[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] &&
				echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
		} | "${sudo[@]}" tee "/etc/apt/sources.list.d/$backports.sources" >/dev/null
		"${sudo[@]}" apt-get update -qq
	fi
	has_suite "$backports" && target=(-t "$backports")
fi
if ! has_candidate valkey-server; then
	echo "deps: no valkey-server package for this system; install Valkey 7.2 or later yourself" >&2
	exit 3
fi
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${target[@]}" valkey-server >/dev/null
# Not at the next boot either.
if [ -d /run/systemd/system ]; then
	"${sudo[@]}" systemctl disable --now valkey-server.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/valkey-server ] && command -v update-rc.d >/dev/null 2>&1; then
	"${sudo[@]}" update-rc.d valkey-server disable >/dev/null 2>&1 || true
fi
echo "deps: $(valkey-server --version)" >&2
