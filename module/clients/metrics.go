// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import "github.com/prometheus/client_golang/prometheus"

// What the clients count: process-wide, registered with the gateway's
// other collectors (see Collectors).
var (
	refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy_hybrid_llm", Name: "clients_refused_total",
		Help: "Requests refused 401 because they named no known client (no key, a malformed or unknown key, no identity) or sent a key where none is read (the query string, a header spelt otherwise than Authorization, Api-Key or X-Api-Key).",
	}, []string{"gateway"})

	limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy_hybrid_llm", Name: "client_limited_total",
		Help: "Requests answered 429 because their client was over its rpm or tpm, by client and limit (requests, tokens).",
	}, []string{"gateway", "client", "limit"})

	routingHeadersRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy_hybrid_llm", Name: "client_routing_headers_removed_total",
		Help: "Routing headers (those route rules read) removed from the requests of clients that are not trusted, by client.",
	}, []string{"gateway", "client"})
)

// Collectors are the clients' metrics.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{refused, limited, routingHeadersRemoved}
}
