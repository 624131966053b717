// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/prometheus/client_golang/prometheus"
)

// Per-request metrics. Every label value comes from the config (gateway,
// alias and group names) or from a fixed vocabulary (outcome, reason,
// status class), never from the client.
var (
	RequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "requests_total",
		Help: "Requests by alias, the target that answered (group and model; empty when none did), outcome, status class, client (empty without clients) and color (the canary the request was tagged for; empty when none).",
	}, []string{"gateway", "alias", "group", "model", "outcome", "code", "client", "color"})

	FallbacksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "fallbacks_total",
		Help: "Targets left because they failed, by alias, the group left (from), the group that answered (to; empty when none did) and reason.",
	}, []string{"gateway", "alias", "from", "to", "reason"})

	OverflowsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "overflows_total",
		Help: "Targets passed over because they were congested (overflow, red line), by alias, from, to and reason.",
	}, []string{"gateway", "alias", "from", "to", "reason"})

	TokensTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "tokens_total",
		Help: "Tokens from the upstreams' usage, by alias, group, kind (prompt, completion, and within them prompt_cached, prompt_cache_write, completion_reasoning), client (empty without clients) and billing (business, or shadow for mirror copies).",
	}, []string{"gateway", "alias", "group", "kind", "client", "billing"})

	RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "request_duration_seconds",
		Help:    "Time from a request's arrival to the end of its response, by alias and the group that answered.",
		Buckets: requestDurationBuckets,
	}, []string{"gateway", "alias", "group"})

	CostTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "cloud_cost_usd_total",
		Help: "Cloud spend in USD, by group, client (empty without clients) and billing (business, or shadow for mirror copies), from each request's tokens or seconds at the group's prices.",
	}, []string{"gateway", "group", "client", "billing"})

	UsageEstimated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "usage_estimated_total",
		Help: "Answers that brought no usage (a stream cut before its usage chunk, an upstream that sends none) and whose tokens are the gateway's estimate, by alias and group.",
	}, []string{"gateway", "alias", "group"})

	TTFTSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "ttft_seconds",
		Help:    "Time from a request's arrival to its first response byte (for streams, the first token's event), by alias and group.",
		Buckets: ttftBuckets,
	}, []string{"gateway", "alias", "group"})
)

var (
	requestDurationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320}
	ttftBuckets            = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32}
)

// Request outcomes.
const (
	OutcomeOK             = "ok"           // answered with 2xx/3xx
	OutcomeClientError    = "client_error" // a 4xx, the gateway's or an upstream's
	OutcomeUpstream       = "upstream_error"
	OutcomeUnavailable    = "unavailable"     // no target could take it (503/504)
	OutcomeInterrupted    = "interrupted"     // the response broke after its first byte
	OutcomeClientCanceled = "client_canceled" // the client left, before or during the answer
)

// IsOverflowReason tells congestion (overflow) from failure (fallback).
func IsOverflowReason(why Reason) bool {
	return why == because.Overflow || why == because.RedLine || why == because.ClassReserve
}

// CodeClass renders a status as 2xx, 4xx, ...
func CodeClass(status int) string {
	if status < 100 || status > 599 {
		return "0"
	}
	return codeClasses[status/100-1]
}

var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// TargetMetrics are a target's series for the common case, resolved once
// at provisioning rather than hashed on every request.
type TargetMetrics struct {
	OK                 prometheus.Counter // outcome ok, 2xx
	Prompt, Completion prometheus.Counter
	Duration, TTFT     prometheus.Observer
}

func NewTargetMetrics(gw, alias string, t *Target, client string) *TargetMetrics {
	return &TargetMetrics{
		OK:         RequestsTotal.WithLabelValues(gw, alias, t.Group, t.Model, OutcomeOK, "2xx", client, ""),
		Prompt:     TokensTotal.WithLabelValues(gw, alias, t.Group, "prompt", client, BillingBusiness),
		Completion: TokensTotal.WithLabelValues(gw, alias, t.Group, "completion", client, BillingBusiness),
		Duration:   RequestDuration.WithLabelValues(gw, alias, t.Group),
		TTFT:       TTFTSeconds.WithLabelValues(gw, alias, t.Group),
	}
}

// MetricsOf returns the target's series for a client: resolved once per
// client, so that a request hashes no labels.
func (t *Target) MetricsOf(gw, alias, client string) *TargetMetrics {
	if client == "" {
		return t.Seen.Metrics
	}
	if tm, ok := t.Seen.byClient.Load(client); ok {
		return tm.(*TargetMetrics)
	}
	tm, _ := t.Seen.byClient.LoadOrStore(client, NewTargetMetrics(gw, alias, t, client))
	return tm.(*TargetMetrics)
}

// Billing label values of the token and cost metrics.
const (
	BillingBusiness = "business"
	BillingShadow   = "shadow"
)

// The token kinds within a prompt and a completion (see TokensTotal): a
// part of them, not added to them.
const (
	KindPromptCached        = "prompt_cached"
	KindPromptCacheWrite    = "prompt_cache_write"
	KindCompletionReasoning = "completion_reasoning"
)
