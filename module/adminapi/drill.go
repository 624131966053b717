// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package adminapi

// DrillAnswer is what one drill request got.
type DrillAnswer struct {
	// whether it was answered (any HTTP status)
	Reachable bool    `json:"reachable"`
	Status    int     `json:"status"`
	OK        bool    `json:"ok"`
	LatencyMS float64 `json:"latency_ms"`
	// the model name in the upstream's answer
	AnsweredModel string `json:"answered_model,omitempty"`
	// the upstream's error message, or why it could not be reached
	Error string `json:"error,omitempty"`
}

// DrillEndpoint is what one endpoint of a target answered.
type DrillEndpoint struct {
	// the endpoint's upstream address, as the group's proxy dials it
	Address string `json:"address"`
	DrillAnswer
}

// DrillResult is what one target answered a drill: each of its group's
// endpoints, and a summary. The target is ok when every endpoint is; the
// summary is then the first endpoint's answer (the slowest latency),
// else the first failed endpoint's.
type DrillResult struct {
	Group string `json:"group"`
	Model string `json:"model"`
	DrillAnswer
	Endpoints []DrillEndpoint `json:"endpoints"`
}
