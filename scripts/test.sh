#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs redis-server and
# PostgreSQL if missing, then runs vet and every test (real servers are
# started on free ports by the tests themselves; set REDIS_URL/DATABASE_URL
# to use your own instead).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# bench/ and extra/fenceotel/ are nested modules (the peers, redsync and
# redislock, and OpenTelemetry must not become the library's dependencies);
# go.work makes them resolvable from here.
go vet ./... ./bench/... ./extra/fenceotel/...
go test -count=1 -timeout 20m "$@" ./... ./bench/... ./extra/fenceotel/...
