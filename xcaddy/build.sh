#!/usr/bin/env bash
# Builds a custom Caddy with caddy-hybrid-llm from this checkout, using
# xcaddy (installed from the Go module proxy on first use).
#
#   bash xcaddy/build.sh [output]      default output: bin/caddy
#
# CADDY_VERSION picks the Caddy release (default v2.11.9).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bin/caddy}
case $out in /*) ;; *) out=$PWD/$out ;; esac
xcaddy_version=v0.4.5
caddy_version=${CADDY_VERSION:-v2.11.9}

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
xcaddy=$gobin/xcaddy
if ! "$xcaddy" version 2>/dev/null | grep -q "^$xcaddy_version"; then
	echo "installing xcaddy $xcaddy_version" >&2
	go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$xcaddy_version"
fi

module=$(cd "$root" && go list -m)
mkdir -p "$(dirname "$out")"
# the pinned @v0.0.0 keeps go from asking the module proxy for versions of
# this (local) module; the replacement points it at the checkout
cd "$(dirname "$out")"
"$xcaddy" build "$caddy_version" --output "$out" --with "$module@v0.0.0=$root"
"$out" version
