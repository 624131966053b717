// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package adminapi

import "github.com/hybridllm/caddy-hybrid-llm/module/cost"

// LedgerDoc is the answer of GET /hybrid_llm/ledger: the window's
// three-way cost comparison for each gateway.
type LedgerDoc struct {
	Gateways      []LedgerGateway `json:"gateways"`
	WindowSeconds float64         `json:"window_seconds"`
}

// LedgerGateway is one gateway's comparison in a LedgerDoc.
type LedgerGateway struct {
	Gateway string `json:"gateway"`
	cost.Comparison
	// each client's tokens and cost in the window (with clients)
	Clients []ClientUse `json:"clients,omitempty"`
}

// Scenarios are the comparison's scenarios: all cloud, all self-hosted
// and the hybrid as run, in that order.
func (g *LedgerGateway) Scenarios() [3]cost.Scenario {
	return [3]cost.Scenario{g.AllCloud, g.AllSelfHosted, g.Hybrid}
}

// ClientUse is one client's use in a bucket or a window.
type ClientUse struct {
	Client           string  `json:"client"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	SelfHostedTokens int64   `json:"self_hosted_tokens"`
	CloudUSD         float64 `json:"cloud_usd"`
	// the client's share of the self-hosted fixed cost: its self-hosted
	// tokens at the window's cost per token
	SelfHostedUSD float64 `json:"self_hosted_usd"`
}
