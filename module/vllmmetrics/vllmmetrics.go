// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package vllmmetrics reads what a vLLM server's /metrics exposition says
// about the load of each served model, and keeps the statistics of its
// time-to-first-token histogram over a sliding window.
//
// It is a leaf: it imports nothing of the product.
package vllmmetrics

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// vLLM metric names the gateway reads (see vLLM's PrometheusStatLogger).
const (
	metricWaiting  = "vllm:num_requests_waiting"
	metricRunning  = "vllm:num_requests_running"
	metricKVUsage  = "vllm:kv_cache_usage_perc"
	metricGPUCache = "vllm:gpu_cache_usage_perc" // the name before vLLM 0.9.2
	metricTTFT     = "vllm:time_to_first_token_seconds"
	// the prefix cache's counters, in tokens (vLLM V1)
	metricPrefixQueries = "vllm:prefix_cache_queries_total"
	metricPrefixHits    = "vllm:prefix_cache_hits_total"
	labelModelName      = "model_name"
	maxMetricsBytes     = 8 << 20
)

// maxValue is the largest metric value taken as a measurement; anything
// larger is a bug or a lie.
const maxValue = 1e9

// ModelLoad is what one /metrics scrape says about one served model, with
// the series of all engines (data-parallel ranks) summed.
type ModelLoad struct {
	Waiting float64
	Running float64
	// KVUsage is the mean KV-cache usage of the engines, 0..1; NaN when
	// the server does not report it.
	KVUsage float64
	// TTFT is the cumulative time-to-first-token histogram, engines
	// summed; nil when not reported.
	TTFT *Histogram
	// PrefixQueries and PrefixHits are the prefix cache's counters since
	// the server started, in prompt tokens, engines summed; 0 when not
	// reported.
	PrefixQueries, PrefixHits float64

	kvSeries int
}

// Histogram is a cumulative histogram: Counts[i] observations at or
// below Bounds[i]; the last bound is +Inf.
type Histogram struct {
	Bounds []float64
	Counts []float64
}

// Parse reads a vLLM /metrics exposition (Prometheus text
// format) and returns the load per model_name label. Series of several
// engines are summed (KV usage averaged). vllm:gpu_cache_usage_perc is
// used where vllm:kv_cache_usage_perc is absent (vLLM 0.9.1 and older).
// A series whose value is no plausible measurement (NaN, infinite,
// negative, over 1e9, a KV usage over 1) is left out as if absent;
// invalid names the first one, for a warning.
func Parse(r io.Reader) (loads map[string]*ModelLoad, invalid string, err error) {
	selected, release, err := readSelected(r)
	if err != nil {
		return nil, "", fmt.Errorf("reading metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(selected))
	release() // the families hold copies of what they read
	if err != nil {
		return nil, "", fmt.Errorf("parsing metrics: %w", err)
	}
	p := parsed{families: families, loads: make(map[string]*ModelLoad)}
	found := p.queues()
	p.kvUsage()
	p.ttft()
	p.prefixCache()
	if !found {
		return nil, p.invalid, errors.New("no vLLM queue metrics (" + metricWaiting + ", " + metricRunning + ") in the exposition")
	}
	return p.loads, p.invalid, nil
}

// parsed is a scrape's families as Parse reads them into loads, by
// model, noting the first invalid series.
type parsed struct {
	families map[string]*dto.MetricFamily
	loads    map[string]*ModelLoad
	invalid  string
}

// value is a series' value if it is a measurement (0..limit).
func (p *parsed) value(family string, m *dto.Metric, limit float64) (float64, bool) {
	v := gaugeValue(m)
	if v >= 0 && v <= limit { // false for NaN too
		return v, true
	}
	if p.invalid == "" {
		p.invalid = family + " = " + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return 0, false
}

// get is the load of a series' model.
func (p *parsed) get(m *dto.Metric) *ModelLoad {
	name := labelValue(m, labelModelName)
	l := p.loads[name]
	if l == nil {
		l = &ModelLoad{KVUsage: math.NaN()}
		p.loads[name] = l
	}
	return l
}

// queues reads the queue gauges; it reports whether they are there,
// unless every series of them is invalid.
func (p *parsed) queues() bool {
	found, valid, rejected := false, 0, 0
	for _, name := range [...]string{metricWaiting, metricRunning} {
		f := p.families[name]
		if f == nil {
			continue
		}
		found = true
		for _, m := range f.GetMetric() {
			v, ok := p.value(name, m, maxValue)
			if !ok {
				rejected++
				continue
			}
			valid++
			if name == metricWaiting {
				p.get(m).Waiting += v
			} else {
				p.get(m).Running += v
			}
		}
	}
	return found && (valid > 0 || rejected == 0)
}

// kvUsage reads the KV-cache usage, averaged over engines.
func (p *parsed) kvUsage() {
	kv := p.families[metricKVUsage]
	if kv == nil {
		kv = p.families[metricGPUCache]
	}
	if kv == nil {
		return
	}
	for _, m := range kv.GetMetric() {
		v, ok := p.value(kv.GetName(), m, 1)
		if !ok {
			continue
		}
		l := p.get(m)
		if l.kvSeries == 0 {
			l.KVUsage = 0
		}
		l.KVUsage += v
		l.kvSeries++
	}
	for _, l := range p.loads {
		if l.kvSeries > 1 {
			l.KVUsage /= float64(l.kvSeries)
		}
	}
}

// ttft reads the time-to-first-token histogram, engines summed.
func (p *parsed) ttft() {
	f := p.families[metricTTFT]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		return
	}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		l := p.get(m)
		if l.TTFT == nil {
			l.TTFT = new(Histogram)
		}
		l.TTFT.add(h)
	}
}

// prefixCache reads the prefix cache's counters, engines summed.
func (p *parsed) prefixCache() {
	for _, name := range [...]string{metricPrefixQueries, metricPrefixHits} {
		f := p.families[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			v, ok := p.value(name, m, math.MaxFloat64)
			if !ok {
				continue
			}
			if l := p.get(m); name == metricPrefixQueries {
				l.PrefixQueries += v
			} else {
				l.PrefixHits += v
			}
		}
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func gaugeValue(m *dto.Metric) float64 {
	var v float64
	switch {
	case m.GetGauge() != nil:
		v = m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		v = m.GetUntyped().GetValue()
	case m.GetCounter() != nil:
		v = m.GetCounter().GetValue()
	}
	return v
}

// add sums one series' buckets into h, matching buckets by bound.
func (h *Histogram) add(src *dto.Histogram) {
	sawInf := false
	for _, b := range src.GetBucket() {
		h.addBucket(b.GetUpperBound(), float64(b.GetCumulativeCount()))
		sawInf = sawInf || math.IsInf(b.GetUpperBound(), 1)
	}
	if !sawInf {
		h.addBucket(math.Inf(1), float64(src.GetSampleCount()))
	}
}

func (h *Histogram) addBucket(bound, count float64) {
	i, ok := slices.BinarySearch(h.Bounds, bound)
	if ok {
		h.Counts[i] += count
		return
	}
	h.Bounds = slices.Insert(h.Bounds, i, bound)
	h.Counts = slices.Insert(h.Counts, i, count)
}

// Total is the number of observations.
func (h *Histogram) Total() float64 {
	if h == nil || len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Delta returns h minus an earlier scrape of the same histogram, and false
// when the two do not line up (different buckets, or a counter reset such
// as a vLLM restart).
func (h *Histogram) Delta(earlier *Histogram) (*Histogram, bool) {
	if earlier == nil || !slices.Equal(h.Bounds, earlier.Bounds) {
		return nil, false
	}
	d := &Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts))}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i] - earlier.Counts[i]
		if d.Counts[i] < 0 {
			return nil, false
		}
	}
	return d, true
}

// Quantile estimates the q-quantile like Prometheus' histogram_quantile:
// linear interpolation inside the bucket that holds the rank. It returns
// NaN without observations; a rank in the +Inf bucket yields the highest
// finite bound.
func (h *Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	for i, c := range h.Counts {
		if c < rank {
			continue
		}
		if math.IsInf(h.Bounds[i], 1) {
			if i == 0 {
				return math.NaN()
			}
			return h.Bounds[i-1]
		}
		lower, prev := 0.0, 0.0
		if i > 0 {
			lower, prev = h.Bounds[i-1], h.Counts[i-1]
		}
		if c == prev {
			return h.Bounds[i]
		}
		return lower + (h.Bounds[i]-lower)*(rank-prev)/(c-prev)
	}
	return h.Bounds[len(h.Bounds)-1]
}
