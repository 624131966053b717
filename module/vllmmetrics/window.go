// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package vllmmetrics

import (
	"maps"
	"math"
	"slices"
	"time"
)

// SumTTFT sums the TTFT histograms of all models, matching buckets by
// bound; nil when no model reports one.
func SumTTFT(loads map[string]*ModelLoad) *Histogram {
	var sum *Histogram
	for _, name := range slices.Sorted(maps.Keys(loads)) {
		h := loads[name].TTFT
		if h == nil {
			continue
		}
		if sum == nil {
			sum = &Histogram{}
		}
		for i := range h.Bounds {
			sum.addBucket(h.Bounds[i], h.Counts[i])
		}
	}
	return sum
}

// Window keeps the histograms of the recent scrapes, to tell the
// quantiles of the observations made within a sliding window. The zero
// value is empty; it is not safe for concurrent use.
type Window struct {
	ring []sample
}

type sample struct {
	at time.Time
	h  *Histogram
}

// Observe records the cumulative histogram h scraped at t (nil: none
// reported, which empties the window) and returns p50 and p99 of the
// observations made within span before t. Both are NaN without
// observations, and after a counter reset (a restarted server), which
// starts the window again.
func (w *Window) Observe(t time.Time, h *Histogram, span time.Duration) (p50, p99 float64) {
	if h == nil {
		w.ring = w.ring[:0]
		return math.NaN(), math.NaN()
	}
	w.ring = append(w.ring, sample{at: t, h: h})
	// the oldest sample kept is the last one at or before the window start
	cut := 0
	for i := range w.ring {
		if t.Sub(w.ring[i].at) >= span {
			cut = i
		}
	}
	w.ring = slices.Delete(w.ring, 0, cut)
	d, ok := h.Delta(w.ring[0].h)
	if !ok {
		// a restarted server: start the window again
		w.ring = append(w.ring[:0], sample{at: t, h: h})
		return math.NaN(), math.NaN()
	}
	return d.Quantile(0.5), d.Quantile(0.99)
}
