// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"go.uber.org/zap"
)

// BenchmarkRegistryEndpoints100 applies a registry group of 100 endpoints
// the config lacks: their weights changed, and all of them added and
// removed (the probers' start and stop stubbed out).
func BenchmarkRegistryEndpoints100(b *testing.B) {
	list := func(w float64) []registry.Endpoint {
		out := make([]registry.Endpoint, 100)
		for i := range out {
			out[i] = registry.Endpoint{Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1), Weight: &w}
		}
		return out
	}
	one, two := list(1), list(2)
	newGroup := func() *VLLMGroup {
		return &VLLMGroup{Name: "self", Endpoints: map[string]*Endpoint{},
			adds: endpointAdds{spawn: func(dial string) (*Endpoint, error) {
				return &Endpoint{Dial: dial, weight: 1, Drained: new(atomic.Bool), Breaker: new(breaker.Breaker)}, nil
			},
				unspawn: func(*Endpoint) {}}}
	}
	logger := zap.NewNop()
	b.Run("weights", func(b *testing.B) {
		g := newGroup()
		g.ApplyEndpoints(one, logger)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%2 == 0 {
				g.ApplyEndpoints(two, logger)
			} else {
				g.ApplyEndpoints(one, logger)
			}
		}
	})
	b.Run("add_remove", func(b *testing.B) {
		g := newGroup()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%2 == 0 {
				g.ApplyEndpoints(one, logger)
			} else {
				g.ApplyEndpoints(nil, logger)
			}
		}
	})
}
