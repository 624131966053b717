#!/usr/bin/env bash
# Several gateways, one registry: one etcd, a simulated vLLM and cloud,
# and three Caddy processes with examples/cluster/Caddyfile, all on
# loopback. Needs etcd (Debian: apt-get install etcd-server).
#
#   bash examples/cluster/demo.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if ! command -v etcd >/dev/null 2>&1; then
	echo "the cluster demo needs etcd: apt-get install etcd-server" >&2
	exit 1
fi
mkdir -p bin
echo "building bin/caddy ..." >&2
go build -o bin/caddy ./xcaddy/cmd/caddy
exec go run ./examples/cluster -bin bin -state "$root/.cluster" "$@"
