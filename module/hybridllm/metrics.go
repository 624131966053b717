// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"errors"
	"sync"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/statemetrics"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// The collectors are process-wide singletons, registered into the
// registry of every config Caddy loads: values survive reloads, and a
// second registration in one registry is not an error.
var (
	metricsOnce sync.Once
	collectors  []prometheus.Collector
)

const metricsNS = "caddy_hybrid_llm"

func registerMetrics(reg *prometheus.Registry, logger *zap.Logger) {
	metricsOnce.Do(func() {
		collectors = []prometheus.Collector{newStateCollector(), routing.RequestsTotal, routing.FallbacksTotal,
			routing.OverflowsTotal, routing.TokensTotal, routing.UsageEstimated, routing.RequestDuration, routing.TTFTSeconds, routing.CostTotal, routing.SchedulerTransitions, routing.DegradedTotal,
			routing.ColorsIgnored, routing.MirrorRequests, routing.MirrorDropped, routing.MirrorDuration, routing.MirrorTTFT}
		collectors = append(collectors, clients.Collectors()...)
	})
	if reg == nil {
		return
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				logger.Error("registering metrics", zap.Error(err))
			}
		}
	}
}

// newStateCollector is the scrape-time collector of the live gateways'
// state (module/statemetrics).
func newStateCollector() *statemetrics.Collector { return statemetrics.New(state, booksGauges) }

// booksGauges are what the live gateways' books say, for those that
// price their self-hosted groups: utilization over the last minute, the
// cost per million tokens over the last five.
func booksGauges() []statemetrics.Books {
	var out []statemetrics.Books
	for _, g := range liveGateways() {
		if g.money.Ledger == nil || !g.money.HasSelfCost() {
			continue
		}
		t := g.clock.Now()
		out = append(out, statemetrics.Books{Gateway: g.Name,
			Utilization:                g.money.Comparison(t.Add(-time.Minute), t.Add(books.BucketSize)).Hybrid.Utilization,
			SelfHostedPerMillionTokens: g.money.Comparison(t.Add(-5*time.Minute), t.Add(books.BucketSize)).SelfHostedPerMillionTokens})
	}
	return out
}
