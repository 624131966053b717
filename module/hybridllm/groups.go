// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/fleetlink"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
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
	// KindAnthropic is Anthropic's API (see upstream.KindAnthropic).
	KindAnthropic = upstream.KindAnthropic
)

// CloudSpend caps the cloud spend (see package money).
type CloudSpend = money.CloudSpend

// The aliases' config (see package routing).
type (
	// Alias maps a business model name to the targets that can serve it.
	Alias = routing.Alias
	// Target is one entry of an alias: a group plus the model name that
	// group serves.
	Target = routing.Target
	// AttemptLimits bound each attempt on a target.
	AttemptLimits = routing.AttemptLimits
	// Rule is a pre-routing rule.
	Rule = routing.Rule
	// SetConfig are the settings of one of an alias's weighted sets.
	SetConfig = routing.SetConfig
	// HealthConfig is health-score scheduling.
	HealthConfig = routing.HealthConfig
	// DegradeConfig is an alias's degradation chain.
	DegradeConfig = routing.DegradeConfig
	// TierConfig marks a target as a degraded tier of its alias.
	TierConfig = routing.TierConfig
	// Color is a colored canary of an alias.
	Color = routing.Color
	// Mirror copies a sampled share of an alias's requests to a target.
	Mirror = routing.Mirror
	// BreakerConfig is a group's circuit breaker.
	BreakerConfig = routing.BreakerConfig
)

// Attempt and mirror time limits when a target sets none (see package
// routing).
const (
	DefaultAttemptTimeout   = routing.DefaultAttemptTimeout
	DefaultFirstByteTimeout = routing.DefaultFirstByteTimeout
	DefaultIdleTimeout      = routing.DefaultIdleTimeout
	DefaultMirrorTimeout    = routing.DefaultMirrorTimeout
)

// The registry's config (see package fleetlink).
type (
	// RegistryConfig is where several gateways share their runtime state.
	RegistryConfig = fleetlink.RegistryConfig
	// RegistryTLS holds the files of a TLS connection to etcd.
	RegistryTLS = fleetlink.RegistryTLS
)
