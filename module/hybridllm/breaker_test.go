// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/prometheus/client_golang/prometheus"
)

// An idle gateway tells the truth about a breaker whose cooldown has
// passed: the state reads half_open (the next request is its trial), not
// open with an open_until in the past, and the breaker_open gauge reads 0,
// not 1 until a request comes; no request and nothing in the background
// has to run for it. The breaker opens on a real request through Caddy.
func TestIdleBreakerPastItsCooldownIsNotOpen(t *testing.T) {
	clk := driveProcessClock(t)

	cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusInternalServerError)
	}))
	defer cloud.Close()
	addr := freeAddr(t)
	handler := `{"handler":"hybrid_llm","name":"idle","groups":{"cloud":{"kind":"openai","model_check":"off",` +
		`"breaker":{"allowed_fails":1,"cooldown":30000000000},` +
		`"proxy":{"upstreams":[{"dial":"` + strings.TrimPrefix(cloud.URL, "http://") + `"}]}}},` +
		`"aliases":{"chat-main":{"targets":[{"group":"cloud","model":"gpt-4o-mini"}]}}}`
	cfg := `{"admin":{"disabled":true},"logging":{"logs":{"default":{"writer":{"output":"discard"}}}},` +
		`"apps":{"http":{"servers":{"gw":{"listen":["` + addr + `"],"automatic_https":{"disable":true},` +
		`"routes":[{"handle":[` + handler + `]}]}}}}}`
	if err := caddy.Load([]byte(cfg), true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"chat-main","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	breakerNow := func() (*adminapi.BreakerState, float64) {
		t.Helper()
		var bs *adminapi.BreakerState
		for _, gs := range state().Gateways {
			for _, grp := range gs.Groups {
				if gs.Name == "idle" && grp.Name == "cloud" {
					bs = grp.Breaker
				}
			}
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newStateCollector())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		gauge := -1.0
		for _, mf := range mfs {
			if mf.GetName() != metricsNS+"_breaker_open" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["gateway"] == "idle" && labels["group"] == "cloud" && labels["endpoint"] == "" {
					gauge = m.GetGauge().GetValue()
				}
			}
		}
		if bs == nil || gauge < 0 {
			t.Fatalf("no breaker in the state (%v) or the metrics (%v)", bs, gauge)
		}
		return bs, gauge
	}
	bs, gauge := breakerNow()
	if bs.State != "open" || bs.OpenUntil == nil || gauge != 1 {
		t.Fatalf("after the failure: %+v, gauge %v; want open for the cooldown, gauge 1", bs, gauge)
	}
	// one second short of the cooldown: still open
	clk.Advance(29 * time.Second)
	if bs, gauge := breakerNow(); bs.State != "open" || gauge != 1 {
		t.Fatalf("within the cooldown: %+v, gauge %v", bs, gauge)
	}
	// the cooldown is over and no request came
	clk.Advance(time.Second)
	bs, gauge = breakerNow()
	if bs.State != "half_open" || bs.OpenUntil != nil || bs.Trial || gauge != 0 {
		t.Fatalf("past the cooldown with no traffic: state %q open_until %v trial %v, gauge %v; want half_open, none, no trial, gauge 0",
			bs.State, bs.OpenUntil, bs.Trial, gauge)
	}
}
