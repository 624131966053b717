// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package caddyfile registers the Caddyfile directives of
// caddy-hybrid-llm.
package caddyfile

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/hybridllm/caddy-hybrid-llm/module/hybridllm"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("hybrid_llm", hybridllm.ParseCaddyfile)
	// like reverse_proxy, which it replaces on LLM routes; a catch-all
	// respond in the same block still sorts first, so put hybrid_llm in
	// its own handle block
	httpcaddyfile.RegisterDirectiveOrder("hybrid_llm", httpcaddyfile.Before, "reverse_proxy")
}
