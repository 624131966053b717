// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// vLLM's histogram buckets (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	latencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// finish reasons with a request_success series.
var finishReasons = [...]string{"stop", "length", "abort"}

// vllmBlockSize is the KV-cache block size reported in cache_config_info.
const vllmBlockSize = 16

// engineMetrics holds one engine's resolved series, so the request path
// never looks labels up.
type engineMetrics struct {
	running, waiting                  prometheus.Gauge
	promptTokens, genTokens, preempts prometheus.Counter
	cacheQueries, cacheHits           prometheus.Counter // prefix cache, in tokens
	success                           [len(finishReasons)]prometheus.Counter
	ttft, e2e, queue                  prometheus.Observer
}

// vllmMetrics is the metric set of one VLLM instance, in its own registry.
// Names, types, help texts and labels follow vLLM's V1 PrometheusStatLogger.
// vllm:kv_cache_usage_perc is computed at scrape time by a kvCollector.
type vllmMetrics struct {
	reg     *prometheus.Registry
	engines []engineMetrics
}

func newVLLMMetrics(model string, engines, blocks int, kv prometheus.Collector) *vllmMetrics {
	labels := []string{"model_name", "engine"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	running := gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	waiting := gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	prompt := counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	gen := counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	preempt := counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	queries := counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	hits := counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	success := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total", Help: "Count of successfully processed requests.",
	}, []string{"model_name", "engine", "finished_reason"})
	ttft := hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	e2e := hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", latencyBuckets)
	queue := hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", latencyBuckets)
	cacheInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig",
	}, []string{"block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization", "num_gpu_blocks", "engine"})

	reg := prometheus.NewRegistry()
	reg.MustRegister(running, waiting, kv, prompt, gen, preempt, queries, hits, success, ttft, e2e, queue, cacheInfo)

	numBlocks := strconv.Itoa(blocks)
	m := &vllmMetrics{reg: reg, engines: make([]engineMetrics, engines)}
	for e := range m.engines {
		id := strconv.Itoa(e)
		em := &m.engines[e]
		em.running = running.WithLabelValues(model, id)
		em.waiting = waiting.WithLabelValues(model, id)
		em.promptTokens = prompt.WithLabelValues(model, id)
		em.genTokens = gen.WithLabelValues(model, id)
		em.preempts = preempt.WithLabelValues(model, id)
		em.cacheQueries, em.cacheHits = queries.WithLabelValues(model, id), hits.WithLabelValues(model, id)
		for i, reason := range finishReasons {
			em.success[i] = success.WithLabelValues(model, id, reason)
		}
		em.ttft = ttft.WithLabelValues(model, id)
		em.e2e = e2e.WithLabelValues(model, id)
		em.queue = queue.WithLabelValues(model, id)
		cacheInfo.WithLabelValues(strconv.Itoa(vllmBlockSize), "auto", "True", "0.9", numBlocks, id).Set(1)
	}
	return m
}

// finished counts a finished request by reason.
func (em *engineMetrics) finished(reason string) {
	for i, r := range finishReasons {
		if r == reason {
			em.success[i].Inc()
			return
		}
	}
}
