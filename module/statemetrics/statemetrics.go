// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package statemetrics exports the gateways' live state as Prometheus
// gauges at scrape time: what the probes see per endpoint, red lines,
// overflow, breakers, model checks, weights, health levels, degradation,
// and what the books say. It reads the admin API's state document, the
// same the admin API answers, so that the two never disagree; it imports
// adminapi and healthscore, never the Caddy face.
package statemetrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
)

const metricsNS = "caddy_hybrid_llm"

// Collector exports the live state of the gateways' groups at scrape
// time: what the probes see per endpoint, the red line, and the cloud
// model name checks. Labels come from config only.
type Collector struct {
	// the state document, and the books' gauges, of the live gateways
	state func() adminapi.StateDoc
	books func() []Books

	endpoint endpointDescs
	group    groupDescs
	alias    aliasDescs
	// the gateways' books
	utilization, selfPerMillion *prometheus.Desc
}

// endpointDescs are a vLLM endpoint's series.
type endpointDescs struct {
	up, misconfigured, waiting, running, kv, metricsAge, inflight, redLine, ttft, ttftP99 *prometheus.Desc
	health, serve, prefixHits                                                             *prometheus.Desc
}

// groupDescs are a group's series, and its breakers'.
type groupDescs struct {
	modelListed, overflowActive, overflowTransitions, breakerOpen, breakerOpened, queued *prometheus.Desc
}

// aliasDescs are an alias's series: its targets' weights and health, and
// its degradation.
type aliasDescs struct {
	targetWeight, targetHealth, degradeShare, degradeCapReached, degradeTrigger *prometheus.Desc
}

// Books is what a gateway's books say at scrape time, each nil when
// unknown or not priced.
type Books struct {
	Gateway string
	// the busy share of the self-hosted GPUs over the last minute
	Utilization *float64
	// the self-hosted fixed cost per million tokens over the last 5 min
	SelfHostedPerMillionTokens *float64
}

// New returns a collector of the state that state and books give at
// each scrape.
func New(state func() adminapi.StateDoc, books func() []Books) *Collector {
	ep := []string{"gateway", "group", "endpoint"}
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(metricsNS+"_"+name, help, append(append([]string{}, ep...), extra...), nil)
	}
	c := &Collector{state: state, books: books}
	c.endpoint = endpointDescs{
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
		health: d("endpoint_health_level",
			"With the vllm group's health: the endpoint's health-score level, 0 ok, 1 alert, 2 recovering, 3 degraded, 4 broken."),
		prefixHits: d("endpoint_prefix_cache_hit_ratio",
			"The endpoint's prefix cache hit rate since it started: vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total."),
		serve: d("endpoint_serve_ratio",
			"With the vllm group's health: the share of a whole endpoint the endpoint serves at (0 out, below 1 ramping back)."),
	}
	c.group = groupDescs{
		modelListed: prometheus.NewDesc(metricsNS+"_model_listed",
			"1 when an openai group's /v1/models lists the model name its targets use, 0 when it does not (absent before the first successful check).",
			[]string{"gateway", "group", "model"}, nil),
		overflowActive: prometheus.NewDesc(metricsNS+"_overflow_active",
			"1 while the group overflows (new requests skip it).", []string{"gateway", "group"}, nil),
		queued: prometheus.NewDesc(metricsNS+"_group_queued_requests",
			"Sheddable clients' requests waiting in the gateway for a slot of the group (a vllm group with classes).", []string{"gateway", "group"}, nil),
		overflowTransitions: prometheus.NewDesc(metricsNS+"_overflow_transitions_total",
			"Overflow state changes of the group, on and off.", []string{"gateway", "group"}, nil),
		breakerOpen: prometheus.NewDesc(metricsNS+"_breaker_open",
			"1 while the breaker is open, 0.5 while its half-open trial is in flight, 0 closed or past its cooldown; endpoint is empty for the group's own breaker.",
			[]string{"gateway", "group", "endpoint"}, nil),
		breakerOpened: prometheus.NewDesc(metricsNS+"_breaker_opened_total",
			"Times the breaker opened; endpoint is empty for the group's own breaker.",
			[]string{"gateway", "group", "endpoint"}, nil),
	}
	c.alias = aliasDescs{
		targetWeight: prometheus.NewDesc(metricsNS+"_target_weight",
			"The weight a member of a weighted set is served at now (the health-score scheduler's, or the configured one).",
			[]string{"gateway", "alias", "set", "group", "model"}, nil),
		targetHealth: prometheus.NewDesc(metricsNS+"_target_health_level",
			"A watched weighted set member's health level: 0 ok, 1 alert, 2 recovering, 3 degraded, 4 broken.",
			[]string{"gateway", "alias", "set", "group", "model"}, nil),
		degradeShare: prometheus.NewDesc(metricsNS+"_degrade_share_ratio",
			"Degraded answers among the alias's answered requests over its degrade window.", []string{"gateway", "alias"}, nil),
		degradeCapReached: prometheus.NewDesc(metricsNS+"_degrade_cap_reached",
			"1 while the alias's degraded share has reached its cap (no further degrading unless at_cap allow).", []string{"gateway", "alias"}, nil),
		degradeTrigger: prometheus.NewDesc(metricsNS+"_degrade_trigger_active",
			"1 while an upper target's trigger (slo_breach, kv_pressure) sends its new requests to the lower tiers.",
			[]string{"gateway", "alias", "group", "model"}, nil),
	}
	c.utilization = prometheus.NewDesc(metricsNS+"_self_hosted_utilization_ratio",
		"Busy share of the self-hosted GPUs (those with a cost model) over the last minute, from running / max_num_seqs.",
		[]string{"gateway"}, nil)
	c.selfPerMillion = prometheus.NewDesc(metricsNS+"_self_hosted_usd_per_million_tokens",
		"The self-hosted fixed cost per million tokens served over the last 5 minutes, at their utilization.",
		[]string{"gateway"}, nil)
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ep, gr, al := &c.endpoint, &c.group, &c.alias
	for _, d := range []*prometheus.Desc{ep.up, ep.misconfigured, ep.waiting, ep.running, ep.kv, ep.metricsAge, ep.inflight,
		ep.redLine, ep.ttft, ep.ttftP99, ep.health, ep.serve, ep.prefixHits, gr.modelListed, gr.overflowActive, gr.overflowTransitions, gr.queued,
		gr.breakerOpen, gr.breakerOpened, al.targetWeight, al.targetHealth, al.degradeShare, al.degradeCapReached,
		al.degradeTrigger, c.utilization, c.selfPerMillion} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{c, ch}
	for _, b := range c.books() {
		if b.Utilization != nil {
			e.gauge(c.utilization, *b.Utilization, b.Gateway)
		}
		if b.SelfHostedPerMillionTokens != nil {
			e.gauge(c.selfPerMillion, *b.SelfHostedPerMillionTokens, b.Gateway)
		}
	}
	for _, gs := range c.state().Gateways {
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
	c  *Collector
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

// alias emits an alias's degradation and its targets' weights and health.
func (e emitter) alias(gw string, as *adminapi.AliasState) {
	c := e.c
	if d := as.Degrade; d != nil {
		e.gauge(c.alias.degradeShare, d.Share, gw, as.Name)
		e.flag(c.alias.degradeCapReached, d.CapReached, gw, as.Name)
		for _, tr := range d.Triggers {
			e.flag(c.alias.degradeTrigger, tr.Active, gw, as.Name, tr.Group, tr.Model)
		}
	}
	for _, ts := range as.Targets {
		if ts.Weight != nil {
			e.gauge(c.alias.targetWeight, float64(*ts.Weight), gw, as.Name, ts.Set, ts.Group, ts.Model)
		}
		if h := ts.Health; h != nil {
			e.gauge(c.alias.targetHealth, float64(healthLevel(h.Level)), gw, as.Name, ts.Set, ts.Group, ts.Model)
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
	e.gauge(e.c.group.breakerOpen, v, labels...)
	e.counter(e.c.group.breakerOpened, float64(b.Opened), labels...)
}

// group emits a group's overflow, breaker, model check and endpoints.
func (e emitter) group(gw string, grp *adminapi.GroupState) {
	c := e.c
	if o := grp.Overflow; o != nil {
		e.flag(c.group.overflowActive, o.Active, gw, grp.Name)
		e.counter(c.group.overflowTransitions, float64(o.Transitions), gw, grp.Name)
	}
	if cs := grp.Classes; cs != nil {
		e.gauge(c.group.queued, float64(cs.Queued), gw, grp.Name)
	}
	e.breaker(grp.Breaker, gw, grp.Name, "")
	for i := range grp.Endpoints {
		e.endpoint(grp, &grp.Endpoints[i], gw, grp.Name, grp.Endpoints[i].Address)
	}
	if mc := grp.ModelCheck; mc != nil && mc.CheckedAt != nil && mc.Error == "" {
		for _, m := range grp.Models {
			e.flag(c.group.modelListed, !contains(mc.Missing, m), gw, grp.Name, m)
		}
	}
}

// endpoint emits a vLLM endpoint's health, load and scraped metrics under
// labels l (gateway, group, address).
func (e emitter) endpoint(grp *adminapi.GroupState, es *adminapi.EndpointState, l ...string) {
	c := e.c
	e.breaker(es.Breaker, l...)
	if es.Health != "unknown" {
		e.flag(c.endpoint.up, es.Health == "up", l...)
	}
	if h := es.HealthScore; h != nil {
		e.gauge(c.endpoint.health, float64(healthLevel(h.Level)), l...)
		e.gauge(c.endpoint.serve, float64(*es.ServePercent)/100, l...)
	}
	if es.ServedModels != nil {
		for _, m := range grp.Models {
			_, served := es.ServedModels[m]
			e.flag(c.endpoint.misconfigured, !served, append(l[:len(l):len(l)], m)...)
		}
	}
	e.gauge(c.endpoint.inflight, float64(es.InFlight), l...)
	if es.RedLine > 0 {
		e.gauge(c.endpoint.redLine, float64(es.RedLine), l...)
	}
	m := es.Metrics
	if m.AgeSeconds != nil {
		e.gauge(c.endpoint.metricsAge, *m.AgeSeconds, l...)
		e.gauge(c.endpoint.waiting, m.Waiting, l...)
		e.gauge(c.endpoint.running, m.Running, l...)
		if m.KVCacheUsage != nil {
			e.gauge(c.endpoint.kv, *m.KVCacheUsage, l...)
		}
		if m.PrefixCacheHitRate != nil {
			e.gauge(c.endpoint.prefixHits, *m.PrefixCacheHitRate, l...)
		}
	}
	if m.TTFTP50Seconds != nil && !math.IsNaN(*m.TTFTP50Seconds) {
		e.gauge(c.endpoint.ttft, *m.TTFTP50Seconds, l...)
		e.gauge(c.endpoint.ttftP99, *m.TTFTP99Seconds, l...)
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

var _ prometheus.Collector = (*Collector)(nil)

// healthLevel is a health level's number, from its name.
func healthLevel(name string) int {
	for l := healthscore.OK; l <= healthscore.Broken; l++ {
		if l.String() == name {
			return int(l)
		}
	}
	return 0
}
