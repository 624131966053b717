// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package vllmmetrics

import (
	"math"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	var w Window
	const span = 10 * time.Second
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hist := func(c1, c2 float64) *Histogram {
		return SumTTFT(map[string]*ModelLoad{"m": {TTFT: &Histogram{Bounds: []float64{0.1, 1, math.Inf(1)}, Counts: []float64{c1, c2, c2}}}})
	}
	if p50, _ := w.Observe(at, hist(0, 0), span); !math.IsNaN(p50) {
		t.Errorf("first scrape: %v", p50)
	}
	at = at.Add(5 * time.Second)
	p50, p99 := w.Observe(at, hist(100, 100), span) // 100 fast ones
	if p50 > 0.1 || p99 > 0.1 {
		t.Errorf("fast window: p50 %v p99 %v", p50, p99)
	}
	at = at.Add(6 * time.Second) // the fast ones leave the window... not yet all
	at = at.Add(5 * time.Second)
	_, p99 = w.Observe(at, hist(100, 200), span) // then 100 slow ones
	if p99 <= 0.1 {
		t.Errorf("slow spike not seen: p99 %v", p99)
	}
	at = at.Add(20 * time.Second)
	_, _ = w.Observe(at, hist(100, 200), span)
	at = at.Add(time.Second)
	if p50, _ := w.Observe(at, hist(100, 200), span); !math.IsNaN(p50) {
		t.Errorf("quiet window should have no TTFT, got %v", p50)
	}
}

// The models' histograms are summed bucket by bucket; models without one
// add nothing, and without any there is no histogram.
func TestSumTTFT(t *testing.T) {
	if h := SumTTFT(map[string]*ModelLoad{"a": {}}); h != nil {
		t.Errorf("no TTFT reported: %+v", h)
	}
	inf := math.Inf(1)
	h := SumTTFT(map[string]*ModelLoad{
		"a": {TTFT: &Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{1, 2, 2}}},
		"b": {TTFT: &Histogram{Bounds: []float64{0.1, 1, inf}, Counts: []float64{3, 4, 5}}},
		"c": {},
	})
	if h == nil || len(h.Bounds) != 3 || h.Counts[0] != 4 || h.Counts[1] != 6 || h.Counts[2] != 7 {
		t.Errorf("sum: %+v", h)
	}
}
