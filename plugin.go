// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package caddyhybridllm plugs the caddy-hybrid-llm modules into Caddy:
//
//	xcaddy build --with github.com/hybridllm/caddy-hybrid-llm
package caddyhybridllm

import (
	_ "github.com/hybridllm/caddy-hybrid-llm/caddyfile"
	_ "github.com/hybridllm/caddy-hybrid-llm/module/command"
	_ "github.com/hybridllm/caddy-hybrid-llm/module/hybridllm"
)
