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

func TestBreakerOpenHalfOpenClosed(t *testing.T) {
	cfg := &BreakerConfig{AllowedFails: 3, Window: caddy.Duration(10 * time.Second), Cooldown: caddy.Duration(30 * time.Second)}
	b := new(breaker)
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	// two failures, one outside the window: still closed
	b.failure(cfg, at(0), failCause{})
	b.failure(cfg, at(11), failCause{})
	if ok, _ := b.allow(at(12)); !ok {
		t.Fatal("opened with failures spread over more than the window")
	}
	b.failure(cfg, at(12), failCause{})
	if opened := b.failure(cfg, at(13), failCause{}); !opened {
		t.Fatal("3 failures within 10s did not open")
	}
	if ok, _ := b.allow(at(20)); ok {
		t.Fatal("open breaker let a request through")
	}
	if ok, _ := b.allow(at(42)); ok {
		t.Fatal("let through before the cooldown ended (opened at 13, cooldown 30)")
	}
	ok, trial := b.allow(at(43))
	if !ok || !trial {
		t.Fatal("no half-open trial after the cooldown")
	}
	if ok, _ := b.allow(at(43)); ok {
		t.Fatal("a second request during the half-open trial")
	}
	if s, _, inFlight := b.view(at(43)); s != "half_open" || !inFlight {
		t.Fatalf("during the trial: %s, trial in flight %v", s, inFlight)
	}
	b.trialSucceeded()
	if s, _, _ := b.view(at(43)); s != "closed" {
		t.Fatalf("trial success left it %s", s)
	}
	if ok, trial := b.allow(at(44)); !ok || trial {
		t.Fatal("closed breaker does not let requests through")
	}
}

func TestBreakerReopenExtendsDeadline(t *testing.T) {
	cfg := &BreakerConfig{AllowedFails: 1, Cooldown: caddy.Duration(30 * time.Second)}
	b := new(breaker)
	t0 := time.Unix(1000, 0)
	b.failure(cfg, t0, failCause{}) // open until t0+30
	_, until, _ := b.view(t0)
	if !until.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("open until %v", until)
	}
	// the trial comes late, at t0+50, and fails
	ok, trial := b.allow(t0.Add(50 * time.Second))
	if !ok || !trial {
		t.Fatal("no trial")
	}
	b.trialFailed(cfg, t0.Add(52*time.Second), failCause{})
	state, until, _ := b.view(t0.Add(52 * time.Second))
	if state != "open" || !until.Equal(t0.Add(82*time.Second)) {
		t.Fatalf("re-opened %s until %v, want a full cooldown from the failure (t0+82s)", state, until)
	}
	if ok, _ := b.allow(t0.Add(81 * time.Second)); ok {
		t.Fatal("let through before the extended deadline")
	}
	if ok, trial := b.allow(t0.Add(82 * time.Second)); !ok || !trial {
		t.Fatal("no trial after the extended cooldown")
	}
	if b.opened.Load() != 2 {
		t.Errorf("opened %d times", b.opened.Load())
	}
}

// A request sent before the breaker opened may fail during the half-open
// trial: only the trial decides.
func TestBreakerLateFailureDuringTrial(t *testing.T) {
	b, cfg, t0 := halfOpen(t)
	if reopened := b.failure(cfg, t0.Add(3*time.Second), failCause{}); reopened {
		t.Fatal("a late failure re-opened the breaker under the trial")
	}
	if ok, _ := b.allow(t0.Add(3 * time.Second)); ok {
		t.Fatal("a second request while the trial is in flight")
	}
	b.trialSucceeded()
	if s, _, _ := b.view(t0.Add(3 * time.Second)); s != "closed" || b.opened.Load() != 1 {
		t.Fatalf("after the trial's success: %s, opened %d times", s, b.opened.Load())
	}
}

func TestBreakerTrialReleased(t *testing.T) {
	b, _, t0 := halfOpen(t)
	b.releaseTrial() // the client left: no verdict
	if ok, trial := b.allow(t0.Add(2 * time.Second)); !ok || !trial {
		t.Fatal("a released trial was not offered again")
	}
}

// halfOpen returns a breaker opened by one failure at t0 (cooldown 1s)
// whose half-open trial was taken at t0+2s.
func halfOpen(t *testing.T) (b *breaker, cfg *BreakerConfig, t0 time.Time) {
	t.Helper()
	cfg = &BreakerConfig{AllowedFails: 1, Cooldown: caddy.Duration(time.Second)}
	b, t0 = new(breaker), time.Unix(1000, 0)
	b.failure(cfg, t0, failCause{})
	ok, trial := b.allow(t0.Add(2 * time.Second))
	if !ok || !trial {
		t.Fatal("no trial")
	}
	return b, cfg, t0
}

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
