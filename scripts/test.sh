#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs redis-server, PostgreSQL,
# MariaDB and valkey-server if missing, then runs vet and every test (real
# servers are started on free ports by the tests themselves; set
# REDIS_URL/DATABASE_URL to use your own instead), then the lease and recipe
# packages again on Valkey (FENCELOCK_REDIS_SERVER=valkey-server), and fails
# when the run changed the committed go.work.sum. Arguments go to go test,
# e.g. -run TestX or -v.
#
# Each package's result is shown as it finishes (go test -json through
# internal/tools/progress), a failed package's output in full; the run ends
# with the summary plain go test prints, and the exit code is go test's.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI must run the Valkey tests; elsewhere a machine without a valkey-server
# package (deps.sh exits 3) runs the rest and says so.
valkey=1
scripts/deps.sh --valkey || {
	rc=$?
	[ $rc -eq 3 ] && [ "${CI:-}" != true ] || exit $rc
	valkey=0
}
# bench/ and extra/* are nested modules (the peers, redsync and redislock,
# OpenTelemetry and gocron must not become the library's dependencies);
# go.work makes them resolvable from here.
# A pattern stops at a nested module: fencebridge's peer adapters are each one.
pkgs=(./... ./bench/... ./extra/fencebridge/... ./extra/fencebridge/redsyncbridge/...
	./extra/fencebridge/redislockbridge/... ./extra/fencebridge/internal/peertest/...
	./extra/fenceotel/... ./extra/fencegocron/...)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/progress" ./internal/tools/progress
verbose=()
for a in "$@"; do
	case $a in -v | -v=true | -test.v | -test.v=true) verbose=(-v) ;; esac
done

echo "test: go vet (compiles every package first: minutes on a fresh machine)"
go vet "${pkgs[@]}"
# run runs go test on its arguments through the progress filter and exits on
# failure: go test's code, or the filter's (a broken filter must not pass for
# a green run).
run() {
	set +e
	go test -json -count=1 -timeout 20m "$@" | "$tmp/progress" "${verbose[@]}"
	local status=("${PIPESTATUS[@]}")
	set -e
	[ "${status[0]}" -ne 0 ] && exit "${status[0]}"
	[ "${status[1]}" -ne 0 ] && exit "${status[1]}"
	return 0
}

echo "test: go test; each package's result shows as it finishes, the summary comes at the end"
run "$@" "${pkgs[@]}"

# The packages whose behaviour rests on the server's scripts and commands, on
# Valkey: every server they start is a valkey-server.
if [ $valkey -eq 1 ]; then
	echo "test: the lease and recipe packages again, on $(valkey-server --version | cut -d' ' -f1-3)"
	REDIS_URL= FENCELOCK_REDIS_SERVER=valkey-server run "$@" ./lease/ ./lease/redlock/ ./election/ ./once/ ./lockset/ ./heal/ ./cmd/fencelock/
else
	echo "test: NOT run on Valkey: no valkey-server here (see scripts/deps.sh --valkey)" >&2
fi

# No SHA-1 at run time (issue 31): these again in FIPS 140-only mode.
echo "test: the lease, recipe, verifier and command packages again, under GODEBUG=fips140=only"
GODEBUG=fips140=only run "$@" ./lease/ ./election/ ./once/ ./verifier/... ./cmd/fencelock/

# A fresh clone must stay clean: the workspace's go.work.sum is committed
# whole, so no go command may add to it or drop from it. The builds above
# leave it alone; loading the whole module graph, as go list -m all, gopls
# and go mod download do, is what rewrites it.
go list -m all >/dev/null
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && ! git diff --quiet -- go.work.sum; then
	echo "test: go.work.sum differs from the committed one: commit it as go list -m all leaves it (git diff go.work.sum):" >&2
	git --no-pager diff --stat -- go.work.sum >&2
	exit 1
fi
