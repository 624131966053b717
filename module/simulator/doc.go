// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package simulator provides in-process stand-ins for the upstreams the
// gateway talks to: a self-hosted vLLM OpenAI-compatible server (VLLM) and a
// cloud OpenAI-compatible API (Cloud). Both speak the real wire formats
// (response bodies, SSE streaming, error bodies, and for vLLM the Prometheus
// metrics on /metrics) closely enough for routing, failover, accounting and
// load tests.
//
// Latency is modelled with TTFT (time to first token), for VLLM plus
// PrefillPerToken for each prompt token its per-engine prefix cache did
// not serve, and ITL (inter-token latency). With all of them zero the
// simulators never sleep or create timers, which makes them suitable for
// high-rate load tests.
//
// VLLM's vllm:kv_cache_usage_perc follows a model of vLLM's paged KV cache
// (VLLMConfig.KVCacheTokens per engine, filled by the prompt and generated
// tokens of the running requests), and SetKVFloor, ClimbKV or POST /_sim/kv
// can raise it on purpose, independent of traffic, on the simulator's Clock.
//
// Server runs a handler on a real loopback listener and can refuse and
// accept connections on demand; WithControl adds the /_sim/ runtime control
// endpoints used by the llmsim command.
//
// It is a leaf: it imports nothing of the product.
package simulator
