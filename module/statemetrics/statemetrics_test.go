// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package statemetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
)

// A scrape says what the state document says: an endpoint up with its
// load and red line, one that does not serve a model marked, a breaker
// on its trial at one half, a model the cloud does not list, a member's
// health level by number, and the books' gauges where they are known.
func TestAScrapeSaysWhatTheStateSays(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	age, kv, p50, p99, util := 1.5, 0.25, 0.2, 0.9, 0.5
	weight, serve := 3, 50
	doc := adminapi.StateDoc{Gateways: []adminapi.GatewayState{{
		Name: "gw",
		Aliases: []adminapi.AliasState{{Name: "chat", Targets: []adminapi.TargetState{
			{Group: "self", Model: "qwen", Set: "s", Weight: &weight, Health: &adminapi.TargetHealthState{Level: "degraded"}},
		}}},
		Groups: []adminapi.GroupState{
			{Name: "self", Kind: "vllm", Models: []string{"qwen", "llama"}, Endpoints: []adminapi.EndpointState{{
				Address: "10.0.0.5:8000", Probed: adminapi.Probed{Health: "up", ServedModels: map[string]int{"qwen": 8192}}, InFlight: 4, RedLine: 12,
				Metrics:     adminapi.MetricsState{AgeSeconds: &age, Waiting: 2, Running: 3, KVCacheUsage: &kv, TTFTP50Seconds: &p50, TTFTP99Seconds: &p99},
				HealthScore: &adminapi.TargetHealthState{Level: "alert"}, ServePercent: &serve,
			}}},
			{Name: "cloud", Kind: "openai", Models: []string{"gpt-a", "gpt-b"}, Breaker: &adminapi.BreakerState{State: "half-open", Trial: true, Opened: 2},
				ModelCheck: &adminapi.ModelCheckState{CheckedAt: &now, Missing: []string{"gpt-b"}}},
		},
	}}}
	c := New(func() adminapi.StateDoc { return doc }, func() []Books {
		return []Books{{Gateway: "gw", Utilization: &util}, {Gateway: "unpriced"}}
	})
	reg := prometheus.NewPedanticRegistry() // every series collected is described
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{} // name{label values in order of name}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			got[strings.TrimPrefix(mf.GetName(), metricsNS+"_")+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	ep := "endpoint=10.0.0.5:8000,gateway=gw,group=self"
	for series, want := range map[string]float64{
		"breaker_open{endpoint=,gateway=gw,group=cloud}":                         0.5,
		"breaker_opened_total{endpoint=,gateway=gw,group=cloud}":                 2,
		"endpoint_misconfigured{" + ep + ",model=llama}":                         1,
		"endpoint_misconfigured{" + ep + ",model=qwen}":                          0,
		"endpoint_up{" + ep + "}":                                                1,
		"endpoint_requests_waiting{" + ep + "}":                                  2,
		"endpoint_inflight_requests{" + ep + "}":                                 4,
		"endpoint_red_line_requests{" + ep + "}":                                 12,
		"endpoint_ttft_p99_seconds{" + ep + "}":                                  0.9,
		"endpoint_health_level{" + ep + "}":                                      1,
		"endpoint_serve_ratio{" + ep + "}":                                       0.5,
		"model_listed{gateway=gw,group=cloud,model=gpt-a}":                       1,
		"model_listed{gateway=gw,group=cloud,model=gpt-b}":                       0,
		"self_hosted_utilization_ratio{gateway=gw}":                              0.5,
		"target_health_level{alias=chat,gateway=gw,group=self,model=qwen,set=s}": 3,
		"target_weight{alias=chat,gateway=gw,group=self,model=qwen,set=s}":       3,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", series, v, ok, want)
		}
	}
	for series := range got {
		if strings.HasPrefix(series, "self_hosted_usd_per_million_tokens") || strings.Contains(series, "gateway=unpriced") {
			t.Errorf("%s: the books do not know it", series)
		}
	}
}
