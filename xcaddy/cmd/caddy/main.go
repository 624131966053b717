// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Command caddy is Caddy with the standard modules and caddy-hybrid-llm,
// for a plain `go build ./xcaddy/cmd/caddy` on this repository's go.mod.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/hybridllm/caddy-hybrid-llm"
)

func main() {
	caddycmd.Main()
}
