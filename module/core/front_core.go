// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/lograte"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"go.uber.org/zap"
)

// Front is what the request core reads of the gateway it serves for: set
// up as the gateway is provisioned, read-only while it serves.
type Front struct {
	Name      string // the gateway's
	Clock     clock.Clock
	Logger    *zap.Logger
	MirrorLog *zap.Logger     // the mirror copies' records
	BadUsage  *lograte.Every  // rate-limits the warning about bad usage values
	Money     *money.Money    // the gateway's books, and how it charges requests
	Life      context.Context // done when the gateway's config stops
	Settings
	Pass    *HeaderPass
	Callers *clients.Callers // with clients
	Aliases map[string]*routing.Alias
	Colors  *routing.ColorPicker // when an alias has colors
	// where the Responses API's stored responses are held
	Responses *routing.ResponseBook
}

// Settings are the gateway's request settings, as the core applies them.
type Settings struct {
	MaxBodySize    int64
	Deadline       caddy.Duration // 0: none
	RouteHeadersOn bool           // answers carry the X-Hybrid-* route headers
	AnyStreamUsage bool           // some group asks for stream usage
	Classes        bool           // some group has priority classes
	Priority       bool           // some group sends vLLM the priority field
	ReserveTokens  int            // the clients' reserve_tokens (0: the default)
	// the top-level fields rules look for, and whether a rule matches on
	// a header of a credential's name, which is dropped before the
	// request goes upstream
	Watch           []string
	RuleCredentials bool
}
