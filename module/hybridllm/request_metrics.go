// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/prometheus/client_golang/prometheus"
)

// Per-request metrics. Every label value comes from the config (gateway,
// alias and group names) or from a fixed vocabulary (outcome, reason,
// status class), never from the client.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "requests_total",
		Help: "Requests by alias, the target that answered (group and model; empty when none did), outcome, status class, client (empty without clients) and color (the canary the request was tagged for; empty when none).",
	}, []string{"gateway", "alias", "group", "model", "outcome", "code", "client", "color"})

	fallbacksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "fallbacks_total",
		Help: "Targets left because they failed, by alias, the group left (from), the group that answered (to; empty when none did) and reason.",
	}, []string{"gateway", "alias", "from", "to", "reason"})

	overflowsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "overflows_total",
		Help: "Targets passed over because they were congested (overflow, red line), by alias, from, to and reason.",
	}, []string{"gateway", "alias", "from", "to", "reason"})

	tokensTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "tokens_total",
		Help: "Tokens from the upstreams' usage, by alias, group, kind (prompt, completion), client (empty without clients) and billing (business, or shadow for mirror copies).",
	}, []string{"gateway", "alias", "group", "kind", "client", "billing"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "request_duration_seconds",
		Help:    "Time from a request's arrival to the end of its response, by alias and the group that answered.",
		Buckets: requestDurationBuckets,
	}, []string{"gateway", "alias", "group"})

	costTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "cloud_cost_usd_total",
		Help: "Cloud spend in USD, by group, client (empty without clients) and billing (business, or shadow for mirror copies), from each request's tokens or seconds at the group's prices.",
	}, []string{"gateway", "group", "client", "billing"})

	usageEstimated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "usage_estimated_total",
		Help: "Answers that brought no usage (a stream cut before its usage chunk, an upstream that sends none) and whose tokens are the gateway's estimate, by alias and group.",
	}, []string{"gateway", "alias", "group"})

	ttftSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
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
	outcomeOK             = "ok"           // answered with 2xx/3xx
	outcomeClientError    = "client_error" // a 4xx, the gateway's or an upstream's
	outcomeUpstream       = "upstream_error"
	outcomeUnavailable    = "unavailable"     // no target could take it (503/504)
	outcomeInterrupted    = "interrupted"     // the response broke after its first byte
	outcomeClientCanceled = "client_canceled" // the client left, before or during the answer
)

// isOverflowReason tells congestion (overflow) from failure (fallback).
func isOverflowReason(why reason) bool {
	return why == because.Overflow || why == because.RedLine
}

// codeClass renders a status as 2xx, 4xx, ...
func codeClass(status int) string {
	if status < 100 || status > 599 {
		return "0"
	}
	return codeClasses[status/100-1]
}

var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// targetMetrics are a target's series for the common case, resolved once
// at provisioning rather than hashed on every request.
type targetMetrics struct {
	ok                 prometheus.Counter // outcome ok, 2xx
	prompt, completion prometheus.Counter
	duration, ttft     prometheus.Observer
}

func newTargetMetrics(gw, alias string, t *Target, client string) *targetMetrics {
	return &targetMetrics{
		ok:         requestsTotal.WithLabelValues(gw, alias, t.Group, t.Model, outcomeOK, "2xx", client, ""),
		prompt:     tokensTotal.WithLabelValues(gw, alias, t.Group, "prompt", client, billingBusiness),
		completion: tokensTotal.WithLabelValues(gw, alias, t.Group, "completion", client, billingBusiness),
		duration:   requestDuration.WithLabelValues(gw, alias, t.Group),
		ttft:       ttftSeconds.WithLabelValues(gw, alias, t.Group),
	}
}

// metricsOf returns the target's series for a client: resolved once per
// client, so that a request hashes no labels.
func (t *Target) metricsOf(gw, alias, client string) *targetMetrics {
	if client == "" {
		return t.seen.metrics
	}
	if tm, ok := t.seen.byClient.Load(client); ok {
		return tm.(*targetMetrics)
	}
	tm, _ := t.seen.byClient.LoadOrStore(client, newTargetMetrics(gw, alias, t, client))
	return tm.(*targetMetrics)
}

// Billing label values of the token and cost metrics.
const (
	billingBusiness = "business"
	billingShadow   = "shadow"
)
