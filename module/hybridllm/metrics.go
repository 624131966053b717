// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"errors"
	"math"
	"sync"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
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
		collectors = []prometheus.Collector{newStateCollector(), requestsTotal, fallbacksTotal,
			overflowsTotal, tokensTotal, usageEstimated, requestDuration, ttftSeconds, costTotal, clientsRefused, clientsLimited, routingHeadersRemoved, schedulerTransitions, degradedTotal,
			colorsIgnored, mirrorRequests, mirrorDropped, mirrorDuration, mirrorTTFT}
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

// stateCollector exports the live state of the gateways' groups at scrape
// time: what the probes see per endpoint, the red line, and the cloud
// model name checks. Labels come from config only.
type stateCollector struct {
	up, misconfigured, waiting, running, kv, metricsAge, inflight, redLine, ttft, ttftP99 *prometheus.Desc
	modelListed                                                                           *prometheus.Desc
	overflowActive, overflowTransitions, breakerOpen, breakerOpened                       *prometheus.Desc
	utilization, selfPerMillion                                                           *prometheus.Desc
	targetWeight, targetHealth                                                            *prometheus.Desc
	endpointHealth, endpointServe                                                         *prometheus.Desc
	degradeShare, degradeCapReached, degradeTrigger                                       *prometheus.Desc
}

func newStateCollector() *stateCollector {
	ep := []string{"gateway", "group", "endpoint"}
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(metricsNS+"_"+name, help, append(append([]string{}, ep...), extra...), nil)
	}
	return &stateCollector{
		up:            d("endpoint_up", "Whether the endpoint's /health answered 200 at the last probe (absent before the first probe)."),
		misconfigured: d("endpoint_misconfigured", "1 when the endpoint's /v1/models does not list the model name the gateway sends it; such an endpoint gets no requests for that name.", "model"),
		waiting:       d("endpoint_requests_waiting", "vllm:num_requests_waiting at the last scrape, engines summed."),
		running:       d("endpoint_requests_running", "vllm:num_requests_running at the last scrape, engines summed."),
		kv:            d("endpoint_kv_cache_usage_ratio", "vllm:kv_cache_usage_perc (0..1) at the last scrape."),
		metricsAge:    d("endpoint_metrics_age_seconds", "Seconds since the last successful /metrics scrape."),
		inflight:      d("endpoint_inflight_requests", "Requests the gateway has in flight to the endpoint."),
		redLine:       d("endpoint_red_line_requests", "The most requests the gateway keeps in flight to the endpoint (max_num_seqs + max_queue)."),
		ttft:          d("endpoint_ttft_p50_seconds", "Time to first token p50 over the TTFT window, from vLLM's histogram."),
		ttftP99:       d("endpoint_ttft_p99_seconds", "Time to first token p99 over the TTFT window, from vLLM's histogram."),
		overflowActive: prometheus.NewDesc(metricsNS+"_overflow_active",
			"1 while the group overflows (new requests skip it).", []string{"gateway", "group"}, nil),
		overflowTransitions: prometheus.NewDesc(metricsNS+"_overflow_transitions_total",
			"Overflow state changes of the group, on and off.", []string{"gateway", "group"}, nil),
		breakerOpen: prometheus.NewDesc(metricsNS+"_breaker_open",
			"1 while the breaker is open, 0.5 while its half-open trial is in flight, 0 closed or past its cooldown; endpoint is empty for the group's own breaker.",
			[]string{"gateway", "group", "endpoint"}, nil),
		breakerOpened: prometheus.NewDesc(metricsNS+"_breaker_opened_total",
			"Times the breaker opened; endpoint is empty for the group's own breaker.",
			[]string{"gateway", "group", "endpoint"}, nil),
		utilization: prometheus.NewDesc(metricsNS+"_self_hosted_utilization_ratio",
			"Busy share of the self-hosted GPUs (those with a cost model) over the last minute, from running / max_num_seqs.",
			[]string{"gateway"}, nil),
		selfPerMillion: prometheus.NewDesc(metricsNS+"_self_hosted_usd_per_million_tokens",
			"The self-hosted fixed cost per million tokens served over the last 5 minutes, at their utilization.",
			[]string{"gateway"}, nil),
		targetWeight: prometheus.NewDesc(metricsNS+"_target_weight",
			"The weight a member of a weighted set is served at now (the health-score scheduler's, or the configured one).",
			[]string{"gateway", "alias", "set", "group", "model"}, nil),
		targetHealth: prometheus.NewDesc(metricsNS+"_target_health_level",
			"A watched weighted set member's health level: 0 ok, 1 alert, 2 recovering, 3 degraded, 4 broken.",
			[]string{"gateway", "alias", "set", "group", "model"}, nil),
		endpointHealth: d("endpoint_health_level",
			"With the vllm group's health: the endpoint's health-score level, 0 ok, 1 alert, 2 recovering, 3 degraded, 4 broken."),
		endpointServe: d("endpoint_serve_ratio",
			"With the vllm group's health: the share of a whole endpoint the endpoint serves at (0 out, below 1 ramping back)."),
		degradeShare: prometheus.NewDesc(metricsNS+"_degrade_share_ratio",
			"Degraded answers among the alias's answered requests over its degrade window.", []string{"gateway", "alias"}, nil),
		degradeCapReached: prometheus.NewDesc(metricsNS+"_degrade_cap_reached",
			"1 while the alias's degraded share has reached its cap (no further degrading unless at_cap allow).", []string{"gateway", "alias"}, nil),
		degradeTrigger: prometheus.NewDesc(metricsNS+"_degrade_trigger_active",
			"1 while an upper target's trigger (slo_breach, kv_pressure) sends its new requests to the lower tiers.",
			[]string{"gateway", "alias", "group", "model"}, nil),
		modelListed: prometheus.NewDesc(metricsNS+"_model_listed",
			"1 when an openai group's /v1/models lists the model name its targets use, 0 when it does not (absent before the first successful check).",
			[]string{"gateway", "group", "model"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.misconfigured, c.waiting, c.running, c.kv, c.metricsAge, c.inflight,
		c.redLine, c.ttft, c.ttftP99, c.modelListed, c.overflowActive, c.overflowTransitions, c.breakerOpen, c.breakerOpened,
		c.utilization, c.selfPerMillion, c.targetWeight, c.targetHealth, c.endpointHealth, c.endpointServe,
		c.degradeShare, c.degradeCapReached, c.degradeTrigger} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{c, ch}
	for _, g := range liveGateways() {
		e.ledger(g)
	}
	for _, gs := range state().Gateways {
		for i := range gs.Aliases {
			e.alias(gs.Name, &gs.Aliases[i])
		}
		for i := range gs.Groups {
			e.group(gs.Name, &gs.Groups[i])
		}
	}
}

// emitter sends the state collector's metrics, read from the state
// document, down one Collect's channel.
type emitter struct {
	c  *stateCollector
	ch chan<- prometheus.Metric
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (e emitter) flag(d *prometheus.Desc, on bool, labels ...string) {
	v := 0.0
	if on {
		v = 1
	}
	e.gauge(d, v, labels...)
}

func (e emitter) counter(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// ledger emits a gateway's utilization and self-hosted cost per million
// tokens, when it prices its self-hosted groups.
func (e emitter) ledger(g *Gateway) {
	if g.money.ledger == nil || !g.money.hasSelfCost() {
		return
	}
	t := g.clock.Now()
	if u := g.money.comparison(t.Add(-time.Minute), t.Add(books.BucketSize)).Hybrid.Utilization; u != nil {
		e.gauge(e.c.utilization, *u, g.Name)
	}
	if pm := g.money.comparison(t.Add(-5*time.Minute), t.Add(books.BucketSize)).SelfHostedPerMillionTokens; pm != nil {
		e.gauge(e.c.selfPerMillion, *pm, g.Name)
	}
}

// alias emits an alias's degradation and its targets' weights and health.
func (e emitter) alias(gw string, as *adminapi.AliasState) {
	c := e.c
	if d := as.Degrade; d != nil {
		e.gauge(c.degradeShare, d.Share, gw, as.Name)
		e.flag(c.degradeCapReached, d.CapReached, gw, as.Name)
		for _, tr := range d.Triggers {
			e.flag(c.degradeTrigger, tr.Active, gw, as.Name, tr.Group, tr.Model)
		}
	}
	for _, ts := range as.Targets {
		if ts.Weight != nil {
			e.gauge(c.targetWeight, float64(*ts.Weight), gw, as.Name, ts.Set, ts.Group, ts.Model)
		}
		if h := ts.Health; h != nil {
			e.gauge(c.targetHealth, float64(healthLevel(h.Level)), gw, as.Name, ts.Set, ts.Group, ts.Model)
		}
	}
}

// breaker emits a breaker's state (1 open, 0.5 on its half-open trial)
// and how often it opened.
func (e emitter) breaker(b *adminapi.BreakerState, labels ...string) {
	if b == nil {
		return
	}
	v := 0.0
	switch {
	case b.State == "open":
		v = 1
	case b.Trial:
		v = 0.5
	}
	e.gauge(e.c.breakerOpen, v, labels...)
	e.counter(e.c.breakerOpened, float64(b.Opened), labels...)
}

// group emits a group's overflow, breaker, model check and endpoints.
func (e emitter) group(gw string, grp *adminapi.GroupState) {
	c := e.c
	if o := grp.Overflow; o != nil {
		e.flag(c.overflowActive, o.Active, gw, grp.Name)
		e.counter(c.overflowTransitions, float64(o.Transitions), gw, grp.Name)
	}
	e.breaker(grp.Breaker, gw, grp.Name, "")
	for i := range grp.Endpoints {
		e.endpoint(grp, &grp.Endpoints[i], gw, grp.Name, grp.Endpoints[i].Address)
	}
	if mc := grp.ModelCheck; mc != nil && mc.CheckedAt != nil && mc.Error == "" {
		for _, m := range grp.Models {
			e.flag(c.modelListed, !contains(mc.Missing, m), gw, grp.Name, m)
		}
	}
}

// endpoint emits a vLLM endpoint's health, load and scraped metrics under
// labels l (gateway, group, address).
func (e emitter) endpoint(grp *adminapi.GroupState, es *adminapi.EndpointState, l ...string) {
	c := e.c
	e.breaker(es.Breaker, l...)
	if es.Health != "unknown" {
		e.flag(c.up, es.Health == "up", l...)
	}
	if h := es.HealthScore; h != nil {
		e.gauge(c.endpointHealth, float64(healthLevel(h.Level)), l...)
		e.gauge(c.endpointServe, float64(*es.ServePercent)/100, l...)
	}
	if es.ServedModels != nil {
		for _, m := range grp.Models {
			_, served := es.ServedModels[m]
			e.flag(c.misconfigured, !served, append(l[:len(l):len(l)], m)...)
		}
	}
	e.gauge(c.inflight, float64(es.InFlight), l...)
	if es.RedLine > 0 {
		e.gauge(c.redLine, float64(es.RedLine), l...)
	}
	m := es.Metrics
	if m.AgeSeconds != nil {
		e.gauge(c.metricsAge, *m.AgeSeconds, l...)
		e.gauge(c.waiting, m.Waiting, l...)
		e.gauge(c.running, m.Running, l...)
		if m.KVCacheUsage != nil {
			e.gauge(c.kv, *m.KVCacheUsage, l...)
		}
	}
	if m.TTFTP50Seconds != nil && !math.IsNaN(*m.TTFTP50Seconds) {
		e.gauge(c.ttft, *m.TTFTP50Seconds, l...)
		e.gauge(c.ttftP99, *m.TTFTP99Seconds, l...)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var _ prometheus.Collector = (*stateCollector)(nil)
