// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package upstream is the gateway's upstream groups: a group's config
// and its embedded reverse_proxy (Group, provisioned into GroupRun), the
// state of a group and of its endpoints that outlives reloads (drains,
// overflow, breakers: GroupState), a vLLM group's endpoints with their
// probers, red lines, breakers, weights and health shares (VLLMGroup,
// Endpoint), the endpoints a registry adds, the choice of one endpoint
// for an attempt (the vllm_least_load selection policy, given the
// attempt's Slot through the proxy's response writer), a cloud group's
// model name check, its overflow signals and its cost model.
//
// It knows nothing of aliases, targets, requests' routes or the Caddy
// face: it imports the probes, breakers, overflow controller, health
// scoring, the fleet's share and the leaves, never a part above it.
package upstream
