#!/usr/bin/env bash
# Plain Caddy reverse_proxy vs the hybrid_llm gateway, side by side on
# loopback against the same zero-latency vLLM simulator, with vegeta: a
# minimal config, and the shipped quickstart (examples/Caddyfile) against a
# plain Caddy with the same access log.
#
#   bash examples/bench/run.sh [-duration 2s] [-rounds 5] [-idle-streams 5000] [-quickstart examples/Caddyfile]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p bin
echo "building bin/caddy and bin/llmsim ..." >&2
go build -o bin/caddy ./xcaddy/cmd/caddy
go build -o bin/llmsim ./examples/llmsim
exec go run ./examples/bench -bin bin "$@"
