#!/usr/bin/env bash
# The demo on a fresh machine: installs redis-server and PostgreSQL if
# missing, then runs the demo program against throwaway servers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
demo=gcpause
[ -d examples/$demo ] || demo=basic
# go run is silent while it compiles: over a minute the first time.
echo "demo: compiling examples/$demo (a minute or more on the first run on a fresh machine, seconds after)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/$demo" ./examples/$demo
echo "demo: starting examples/$demo"
"$tmp/$demo"
