#!/usr/bin/env bash
# Routing quality: the prefix-cache hit rate and TTFT of a multi-turn chat
# workload over 4 simulated vLLM replicas, through the hybrid_llm gateway
# (affinity on and off, one and two processes), plain Caddy round_robin
# and least_conn, and a single replica of 4 times the cache (the bound);
# then a priority burst (interactive and batch clients). All on loopback,
# ports 127.0.0.1:19401 to 19422; about a minute.
#
#   bash examples/routebench/run.sh [-seed 1] [-rows gateway,round_robin] [-conversations 48] [-turns 6] [-concurrency 8] [-burst=false]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p bin
echo "building bin/caddy ..." >&2
go build -o bin/caddy ./xcaddy/cmd/caddy
exec go run ./examples/routebench -bin bin "$@"
