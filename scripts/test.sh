#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs redis-server and
# PostgreSQL if missing, then runs vet and every test (real servers are
# started on free ports by the tests themselves; set REDIS_URL/DATABASE_URL
# to use your own instead).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# bench/ is a nested module (its peers, redsync and redislock, must not
# become the library's dependencies); go.work makes ./bench/... resolvable.
go vet ./... ./bench/...
go test -count=1 -timeout 20m "$@" ./... ./bench/...
