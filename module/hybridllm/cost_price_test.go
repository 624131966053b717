// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"math"
	"testing"
)

// A cached input price applies to the prompt tokens the provider served
// from its cache; without one they are input tokens.
func TestCachedInputPrice(t *testing.T) {
	cc := &CostConfig{InputPerMillion: 2.5, CachedInputPerMillion: 1.25, OutputPerMillion: 10}
	if got, want := cc.RequestCost(1000, 10, 800, 0), (200*2.5+800*1.25+10*10)/1e6; math.Abs(got-want) > 1e-15 {
		t.Errorf("cost %v, want %v", got, want)
	}
	// without a cached price, cached tokens are input tokens
	cc.CachedInputPerMillion = 0
	if got, want := cc.RequestCost(1000, 10, 800, 0), (1000*2.5+10*10)/1e6; math.Abs(got-want) > 1e-15 {
		t.Errorf("cost without a cached price %v, want %v", got, want)
	}
}
