// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"math"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/overflow"
)

// OverflowConfig makes a vLLM group overflow (see overflow.Config).
type OverflowConfig = overflow.Config

// Threshold is a trigger and a lower recover level (see overflow.Threshold).
type Threshold = overflow.Threshold

// Signals gathers a vLLM group's overflow inputs: fresh metrics only.
func (g *VLLMGroup) Signals(t time.Time) overflow.Signals {
	s := overflow.Signals{Waiting: math.NaN(), TTFTP99: math.NaN(), KV: math.NaN()}
	for ep := range g.All() {
		snap := ep.Prober.Snapshot()
		s.InFlight += float64(ep.Prober.Inflight.Load())
		if snap.MetricsAt.IsZero() || t.Sub(snap.MetricsAt) > g.Settings.StaleAfter {
			continue
		}
		s.Fresh = true
		for _, l := range snap.Loads {
			s.Waiting = nanAdd(s.Waiting, l.Waiting)
			if !math.IsNaN(l.KVUsage) {
				s.KV = nanMax(s.KV, l.KVUsage)
			}
		}
		if !math.IsNaN(snap.TTFTP99) {
			s.TTFTP99 = nanMax(s.TTFTP99, snap.TTFTP99)
		}
	}
	return s
}

func nanAdd(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	return a + b
}

func nanMax(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	return max(a, b)
}
