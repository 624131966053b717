// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"fmt"
	"math"
	"time"
)

// CostConfig is a group's cost model. A vllm group has a fixed cost: its
// GPUs at a monthly price. An openai group is priced per million tokens
// (input and output) or per second of compute.
type CostConfig struct {
	// GPUs behind the group (kind vllm), all endpoints together.
	GPUs float64 `json:"gpus,omitempty"`

	// The monthly cost of one GPU in USD, all in: amortization, hosting,
	// power, operations (kind vllm).
	GPUCostPerMonth float64 `json:"gpu_cost_per_month,omitempty"`

	// USD per million input (prompt) tokens (kind openai).
	InputPerMillion float64 `json:"input_per_million,omitempty"`

	// USD per million input tokens the provider served from its prompt
	// cache (usage.prompt_tokens_details.cached_tokens), when it bills
	// them apart (kind openai). Default: the input price.
	CachedInputPerMillion float64 `json:"cached_input_per_million,omitempty"`

	// USD per million input tokens the provider wrote to its prompt cache
	// (Anthropic's usage.cache_creation_input_tokens, billed above the
	// input price), when it bills them apart (kind openai). Default: the
	// input price.
	CacheWritePerMillion float64 `json:"cache_write_per_million,omitempty"`

	// USD per million output (completion) tokens (kind openai), reasoning
	// tokens among them.
	OutputPerMillion float64 `json:"output_per_million,omitempty"`

	// USD per second of compute (kind openai), instead of token prices:
	// a request costs its duration times this.
	PerSecond float64 `json:"per_second,omitempty"`
}

func (cc *CostConfig) validate(kind string) error {
	for _, v := range []float64{cc.GPUs, cc.GPUCostPerMonth, cc.InputPerMillion, cc.OutputPerMillion, cc.PerSecond, cc.CachedInputPerMillion, cc.CacheWritePerMillion} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("cost values must be finite and not negative")
		}
	}
	switch kind {
	case KindVLLM:
		if cc.InputPerMillion != 0 || cc.OutputPerMillion != 0 || cc.PerSecond != 0 || cc.CachedInputPerMillion != 0 || cc.CacheWritePerMillion != 0 {
			return fmt.Errorf("a vllm group's cost is gpus and gpu_cost_per_month")
		}
		if cc.GPUs == 0 {
			return fmt.Errorf("cost needs gpus")
		}
	case KindOpenAI, KindAnthropic:
		if cc.GPUs != 0 || cc.GPUCostPerMonth != 0 {
			return fmt.Errorf("a cloud group's cost is input_per_million/output_per_million or per_second")
		}
		if cc.PerSecond != 0 && (cc.InputPerMillion != 0 || cc.OutputPerMillion != 0) {
			return fmt.Errorf("price per second or per token, not both")
		}
	}
	return nil
}

// Tokens are one answer's tokens by class: the prompt, the part of it
// the provider served from its cache and the part it wrote there, and
// the completion.
type Tokens struct {
	Prompt, Cached, CacheWrite, Completion int64
}

// RequestCost is what one cloud request costs: its tokens at their
// class's price, or its duration.
func (cc *CostConfig) RequestCost(t Tokens, dur time.Duration) float64 {
	if cc.PerSecond > 0 {
		return dur.Seconds() * cc.PerSecond
	}
	cachedPrice, writePrice := cc.InputPerMillion, cc.InputPerMillion
	if cc.CachedInputPerMillion > 0 {
		cachedPrice = cc.CachedInputPerMillion
	}
	if cc.CacheWritePerMillion > 0 {
		writePrice = cc.CacheWritePerMillion
	}
	cached := min(max(t.Cached, 0), t.Prompt)
	written := min(max(t.CacheWrite, 0), t.Prompt-cached)
	plain := t.Prompt - cached - written
	return (float64(plain)*cc.InputPerMillion + float64(cached)*cachedPrice + float64(written)*writePrice + float64(t.Completion)*cc.OutputPerMillion) / 1e6
}
