// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// The upstream groups' config (see package upstream).
type (
	// Group is a named set of interchangeable endpoints.
	Group = upstream.Group
	// VLLMSettings are a vllm group's red line, per-endpoint settings
	// and probes.
	VLLMSettings = upstream.VLLMSettings
	// EndpointConfig holds the settings of one endpoint of a vLLM group.
	EndpointConfig = upstream.EndpointConfig
	// ProbeConfig sets how the endpoints of a vLLM group are probed.
	ProbeConfig = upstream.ProbeConfig
	// OverflowConfig sets when a vLLM group overflows.
	OverflowConfig = upstream.OverflowConfig
	// CostConfig is a group's cost model.
	CostConfig = upstream.CostConfig
	// LeastLoadSelection is the vllm_least_load selection policy.
	LeastLoadSelection = upstream.LeastLoadSelection
)

// Group kinds.
const (
	KindVLLM   = upstream.KindVLLM
	KindOpenAI = upstream.KindOpenAI
)

// CloudSpend caps the cloud spend (see package money).
type CloudSpend = money.CloudSpend
