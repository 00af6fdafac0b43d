#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs redis-server and
# PostgreSQL if missing, then runs vet and every test (real servers are
# started on free ports by the tests themselves; set REDIS_URL/DATABASE_URL
# to use your own instead). Arguments go to go test, e.g. -run TestX or -v.
#
# Each package's result is shown as it finishes (go test -json through
# internal/tools/progress), a failed package's output in full; the run ends
# with the summary plain go test prints, and the exit code is go test's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# bench/ and extra/* are nested modules (the peers, redsync and redislock,
# OpenTelemetry and gocron must not become the library's dependencies);
# go.work makes them resolvable from here.
pkgs=(./... ./bench/... ./extra/fencebridge/... ./extra/fenceotel/... ./extra/fencegocron/...)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/progress" ./internal/tools/progress
verbose=()
for a in "$@"; do
	case $a in -v | -v=true | -test.v | -test.v=true) verbose=(-v) ;; esac
done

echo "test: go vet (compiles every package first: minutes on a fresh machine)"
go vet "${pkgs[@]}"
echo "test: go test; each package's result shows as it finishes, the summary comes at the end"
set +e
go test -json -count=1 -timeout 20m "$@" "${pkgs[@]}" | "$tmp/progress" "${verbose[@]}"
status=("${PIPESTATUS[@]}")
set -e
if [ "${status[0]}" -ne 0 ]; then
	exit "${status[0]}"
fi
# go test passed; a broken filter must not pass for a green run.
if [ "${status[1]}" -ne 0 ]; then
	exit "${status[1]}"
fi
# No SHA-1 at run time (issue 31): these again in FIPS 140-only mode.
echo "test: go test under GODEBUG=fips140=only"
GODEBUG=fips140=only go test -count=1 -timeout 20m "$@" ./lease ./election ./once ./verifier/... ./cmd/fencelock
