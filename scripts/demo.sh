#!/usr/bin/env bash
# The demo on a fresh machine: installs redis-server and PostgreSQL if
# missing, then runs the demo program against throwaway servers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
demo=gcpause
[ -d examples/$demo ] || demo=basic
go run ./examples/$demo
