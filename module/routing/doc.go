// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package routing is where a request's way is decided: an alias and its
// targets (rules, weighted sets and their strategies, colors, mirrors,
// the degradation chain and its triggers), health-score scheduling of
// weighted sets and of a vLLM group's endpoints (Schedule, SetHealth),
// the gates a target passes before an attempt (taken out, spend, context
// window, overflow, breakers, the cloud hold, tiers) and the observers
// that see each attempt begin and end (GPU occupancy, health and latency,
// configuration faults, breakers, spans), with the small types they share
// with the request core: what a request asks, its token bounds and its
// client's reservation, its passage past the gates, an attempt's record
// and result, and the request, cost and mirror metrics' series.
//
// It must not import the request core nor the Caddy face (package
// hybridllm): the core drives it, the face provisions it.
package routing

// metricsNS is the namespace of the gateway's metrics.
const metricsNS = "caddy_hybrid_llm"
