// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// twoClouds starts the clouds "a" and "b" of a weighted set; both stop
// with the test.
func twoClouds(t *testing.T) (a, b *simulator.Cloud, aSrv, bSrv *simulator.Server) {
	t.Helper()
	start := func() (*simulator.Cloud, *simulator.Server) {
		c := simulator.NewCloud(simulator.CloudConfig{Models: []string{cloudModel}, APIKey: cloudKey})
		srv, err := simulator.Start("127.0.0.1:0", c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		return c, srv
	}
	a, aSrv = start()
	b, bSrv = start()
	return a, b, aSrv, bSrv
}

// healthBlock is a gateway whose alias spread is served by clouds a and
// b, 60 to 40, watched with short timings; proxyOpts go into both
// groups' proxy blocks.
func healthBlock(a, b *simulator.Server, health, proxyOpts string) string {
	group := func(name string, srv *simulator.Server) string {
		return "group " + name + " {\n\tkind openai\n\tapi_key " + cloudKey + "\n\tmodel_check off\n\tproxy " + srv.URL() +
			" {\n" + proxyOpts + "\n\t}\n}\n"
	}
	return group("a", a) + group("b", b) + "alias spread {\n\tweighted clouds {\n\t\thealth {\n" + health + "\n\t\t}\n" +
		"\t\ttarget a " + cloudModel + " {\n\t\t\tweight 60\n\t\t}\n" +
		"\t\ttarget b " + cloudModel + " {\n\t\t\tweight 40\n\t\t}\n\t}\n}\n"
}

const spreadBody = `{"model":"spread","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4}`

// memberHealth is a weighted set member as the state shows it.
type memberHealth struct {
	Group            string `json:"group"`
	Weight           *int   `json:"weight"`
	ConfiguredWeight *int   `json:"configured_weight"`
	Strategy         string `json:"strategy"`
	Health           *struct {
		Level     string  `json:"level"`
		Sick      bool    `json:"sick"`
		Panic     bool    `json:"panic"`
		ErrorRate float64 `json:"error_rate"`
		P99Ms     int64   `json:"p99_ms"`
		Requests  int     `json:"requests"`
	} `json:"health"`
}

// members returns the members of the alias spread, by group.
func (e *env) members() map[string]memberHealth {
	e.t.Helper()
	out := spreadMembers(e.t, e.gatewayName())
	if len(out) != 2 || out["a"].Health == nil || out["b"].Health == nil {
		e.t.Fatalf("the state lacks the members' health: %+v", out)
	}
	return out
}

// spreadMembers returns the members of the gateway's alias spread, by
// group, as the state shows them.
func spreadMembers(t *testing.T, gw string) map[string]memberHealth {
	t.Helper()
	var st struct {
		Gateways []struct {
			Name    string `json:"name"`
			Aliases []struct {
				Name    string         `json:"name"`
				Targets []memberHealth `json:"targets"`
			} `json:"aliases"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &st); err != nil {
		t.Fatal(err)
	}
	out := map[string]memberHealth{}
	for _, g := range st.Gateways {
		for _, al := range g.Aliases {
			if g.Name == gw && al.Name == "spread" {
				for _, m := range al.Targets {
					out[m.Group] = m
				}
			}
		}
	}
	return out
}

// send posts n requests to spread from 4 clients at once and counts
// where they landed; each must be answered.
func send(t *testing.T, n int) map[string]int {
	t.Helper()
	return sendBody(t, spreadBody, n)
}

// sendBody posts n requests with body from 4 clients at once and counts
// where they landed; each must be answered.
func sendBody(t *testing.T, body string, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				resp, answer := post(t, "/v1/chat/completions", body)
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%d %s", resp.StatusCode, answer)
					return
				}
				mu.Lock()
				counts[resp.Header.Get("X-Hybrid-Target")]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return counts
}

// A member whose error rate passes the threshold is degraded: its weight
// goes to 0 and its share to the other member, within a few ticks, with
// the seed's log lines; once it is well again its weight ramps back in
// steps, without flapping.
func TestHealthDegradesAndRampsBack(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	a, _, aSrv, bSrv := twoClouds(t)
	logPath := e.loadWithGatewayLog(healthBlock(aSrv, bSrv,
		"\t\t\terror_rate 5%\n\t\t\thold 3s\n\t\t\tramp_interval 200ms", "")) // the default window
	gw := e.gatewayName()
	degradedBefore := metricValue(t, "caddy_hybrid_llm_scheduler_transitions_total",
		map[string]string{"gateway": gw, "alias": "spread", "group": "a", "level": "degraded"})

	if c := send(t, 100); c["a"] < 45 || c["b"] < 25 {
		t.Fatalf("the steady split: %v", c)
	}
	if m := e.members(); m["a"].Health.Level != "ok" || *m["a"].Weight != 60 {
		t.Fatalf("a before the fault: %+v", m["a"].Health)
	}

	// cloud a fails three requests in ten; b takes them (the clients
	// never see it) until the scheduler moves a's weight to b
	a.SetFailures(simulator.Failures{ErrorRate: 0.3, ErrorStatus: http.StatusInternalServerError})
	fault := time.Now()
	waitFor(t, "a degraded", func() bool {
		send(t, 8)
		return e.members()["a"].Health.Level == "degraded"
	})
	t.Logf("from the first failures to a's weight at 0, with the default window: %v", time.Since(fault).Round(time.Millisecond))
	m := e.members()
	if *m["a"].Weight != 0 || *m["b"].Weight != 100 || *m["a"].ConfiguredWeight != 60 {
		t.Fatalf("weights after the degrade: a %d, b %d", *m["a"].Weight, *m["b"].Weight)
	}
	// read before the 3 s hold can end and a ramps back
	if w := metricValue(t, "caddy_hybrid_llm_target_weight",
		map[string]string{"gateway": gw, "alias": "spread", "set": "clouds", "group": "b", "model": cloudModel}); w != 100 {
		t.Errorf("b's weight metric %v", w)
	}
	before := len(posts(a.Requests()))
	if c := send(t, 40); c["b"] != 40 {
		t.Errorf("with a degraded: %v", c)
	}
	if n := len(posts(a.Requests())) - before; n != 0 {
		t.Errorf("a, degraded, got %d requests", n)
	}
	// the degrade's line marks the number over its threshold; a "near the
	// thresholds" line may come before it, when a tick saw the error
	// rate between alert_at and the threshold
	for _, line := range [][]string{{`route[a] errorRate=`, `> 5.0%`}, {`scheduler degrade: weight a 60 -> 0`},
		{`scheduler promote: weight b 40 -> 100`}, {`route recovered, traffic fully on b`}} {
		waitFor(t, fmt.Sprintf("the log line %q", line), func() bool { return logLines(t, logPath, line...) == 1 })
	}
	if got := metricValue(t, "caddy_hybrid_llm_scheduler_transitions_total",
		map[string]string{"gateway": gw, "alias": "spread", "group": "a", "level": "degraded"}) - degradedBefore; got != 1 {
		t.Errorf("degraded transitions: %v, want 1", got)
	}

	// a is well again: after the hold it ramps back a quarter at a time
	a.SetFailures(simulator.Failures{})
	var weights []int
	waitFor(t, "a back at its whole weight", func() bool {
		send(t, 8)
		m := e.members()
		if w := *m["a"].Weight; len(weights) == 0 || weights[len(weights)-1] != w {
			weights = append(weights, w)
		}
		return m["a"].Health.Level == "ok"
	})
	t.Logf("a's weight on its way back: %v", weights)
	for i := 1; i < len(weights); i++ {
		if weights[i] < weights[i-1] {
			t.Errorf("the ramp went down: %v", weights)
		}
	}
	if len(weights) < 4 || weights[len(weights)-1] != 60 {
		t.Errorf("a came back in %v, want steps up to 60", weights)
	}
	if n := logLines(t, logPath, "scheduler degrade:"); n != 1 {
		t.Errorf("%d degrade lines, want 1: no flapping", n)
	}
	waitFor(t, "the recovery line", func() bool { return logLines(t, logPath, "route healthy: a back at weight 60") == 1 })
}

// When every member is sick, the last one in service stays in, and the
// set panics: traffic goes to every member by weight.
func TestHealthKeepsTheLastMember(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	a, b, aSrv, bSrv := twoClouds(t)
	logPath := e.loadWithGatewayLog(healthBlock(aSrv, bSrv,
		"\t\t\tp99_latency 40ms\n\t\t\tmin_requests 10\n\t\t\twindow 5s\n\t\t\thold 1m", ""))
	a.SetFailures(simulator.Failures{Stall: 80 * time.Millisecond})
	b.SetFailures(simulator.Failures{Stall: 80 * time.Millisecond})
	waitFor(t, "the panic", func() bool {
		send(t, 8)
		m := e.members()
		return m["a"].Health.Panic
	})
	m := e.members()
	out, kept := m["a"], m["b"]
	if out.Health.Level != "degraded" {
		out, kept = kept, out
	}
	if out.Health.Level != "degraded" || kept.Health.Level == "degraded" || !kept.Health.Sick {
		t.Fatalf("levels: %+v, %+v", *m["a"].Health, *m["b"].Health)
	}
	if *m["a"].Weight != 60 || *m["b"].Weight != 40 {
		t.Errorf("in panic: a %d, b %d, want their configured weights", *m["a"].Weight, *m["b"].Weight)
	}
	if c := send(t, 20); c["a"] == 0 || c["b"] == 0 {
		t.Errorf("in panic every member serves: %v", c)
	}
	waitFor(t, "the panic line", func() bool {
		return logLines(t, logPath, `"level":"error"`, "scheduler panic: every member of set clouds is sick") == 1
	})
	if n := logLines(t, logPath, "kept in service, the last member"); n != 1 {
		t.Errorf("%d lines for the member kept, want 1", n)
	}
}

// A member whose health checks fail (Caddy's active checks on the
// group's proxy, here GET /healthz) is broken: out without waiting for
// requests to fail, and back, by steps, once they pass.
func TestHealthBreaksOnHealthChecks(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	a, _, aSrv, bSrv := twoClouds(t)
	logPath := e.loadWithGatewayLog(healthBlock(aSrv, bSrv, "\t\t\thold 500ms\n\t\t\tramp_interval 100ms",
		"\t\thealth_uri /healthz\n\t\thealth_interval 100ms\n\t\thealth_fails 2"))
	waitFor(t, "both in service", func() bool {
		m := e.members()
		return m["a"].Health.Level == "ok" && *m["a"].Weight == 60
	})
	a.SetHealthy(false)
	waitFor(t, "a broken", func() bool { return e.members()["a"].Health.Level == "broken" })
	before := len(posts(a.Requests()))
	if c := send(t, 20); c["b"] != 20 {
		t.Errorf("with a broken: %v", c)
	}
	if n := len(posts(a.Requests())) - before; n != 0 {
		t.Errorf("a, broken, got %d requests", n)
	}
	if n := logLines(t, logPath, "route[a] broken: its health checks fail"); n != 1 {
		t.Errorf("%d break lines, want 1", n)
	}
	a.SetHealthy(true)
	// it ramps back on the answers it gives at each step
	waitFor(t, "a back", func() bool {
		send(t, 8)
		return e.members()["a"].Health.Level == "ok"
	})
	if c := send(t, 40); c["a"] == 0 {
		t.Errorf("a back at its weight got nothing: %v", c)
	}
	if !strings.Contains(string(adminGet(t, "/metrics")), `caddy_hybrid_llm_target_health_level{alias="spread",gateway="`+e.gatewayName()) {
		t.Error("no health level metric")
	}
}

// A reload keeps the scheduler's state: a member degraded before it
// stays out for the rest of its hold, rather than coming back at its
// whole weight with the new config.
func TestHealthSurvivesAReload(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	a, _, aSrv, bSrv := twoClouds(t)
	block := healthBlock(aSrv, bSrv, "\t\t\thold 1m\n\t\t\tmin_requests 10", "")
	e.load(block)
	a.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable})
	waitFor(t, "a degraded", func() bool {
		send(t, 8)
		return e.members()["a"].Health.Level != "ok"
	})
	a.SetFailures(simulator.Failures{})

	e.load(block + "alias other {\n\ttarget b " + cloudModel + "\n}\n") // any change
	m := e.members()
	if h := m["a"].Health; (h.Level != "degraded" && h.Level != "broken") || *m["a"].Weight != 0 || *m["b"].Weight != 100 {
		t.Fatalf("after the reload: a %s at %d, b at %d", h.Level, *m["a"].Weight, *m["b"].Weight)
	}
	before := len(posts(a.Requests()))
	if c := send(t, 20); c["b"] != 20 {
		t.Errorf("after the reload: %v", c)
	}
	if n := len(posts(a.Requests())) - before; n != 0 {
		t.Errorf("a, in its hold, got %d requests after the reload", n)
	}
}

// A member whose p99 passes the alert level but not the threshold is at
// the alert level: a WARN line, the level in the state and the metrics,
// and nothing else (its weight stays); the alert ends once it is under
// the level again.
func TestHealthAlertsBelowTheThreshold(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	a, _, aSrv, bSrv := twoClouds(t)
	logPath := e.loadWithGatewayLog(healthBlock(aSrv, bSrv,
		"\t\t\tp99_latency 600ms\n\t\t\talert_at 40%\n\t\t\twindow 1s\n\t\t\tmin_requests 8", ""))
	gw := e.gatewayName()
	alerts := metricValue(t, "caddy_hybrid_llm_scheduler_transitions_total",
		map[string]string{"gateway": gw, "alias": "spread", "group": "a", "level": "alert"})

	a.SetFailures(simulator.Failures{Stall: 300 * time.Millisecond}) // over 240 ms, under 600 ms
	waitFor(t, "a at the alert level", func() bool {
		send(t, 8)
		return e.members()["a"].Health.Level == "alert"
	})
	m := e.members()
	if *m["a"].Weight != 60 || *m["b"].Weight != 40 {
		t.Errorf("an alert moved weights: a %d, b %d", *m["a"].Weight, *m["b"].Weight)
	}
	if n := logLines(t, logPath, `"level":"warn"`, `"msg":"route[a] p99=`, "near the thresholds"); n != 1 {
		t.Errorf("%d alert lines, want 1", n)
	}
	if n := logLines(t, logPath, "scheduler degrade:"); n != 0 {
		t.Errorf("an alert degraded: %d lines", n)
	}
	if d := metricValue(t, "caddy_hybrid_llm_scheduler_transitions_total",
		map[string]string{"gateway": gw, "alias": "spread", "group": "a", "level": "alert"}) - alerts; d != 1 {
		t.Errorf("alert transitions moved by %v", d)
	}
	if l := metricValue(t, "caddy_hybrid_llm_target_health_level", map[string]string{"gateway": gw, "alias": "spread", "group": "a"}); l != 1 {
		t.Errorf("a's level metric %v, want 1", l)
	}

	a.SetFailures(simulator.Failures{})
	waitFor(t, "the alert over", func() bool {
		send(t, 8)
		return e.members()["a"].Health.Level == "ok"
	})
	if n := logLines(t, logPath, `"msg":"route[a] p99=`, "back under the alert levels"); n != 1 {
		t.Errorf("%d alert-over lines, want 1", n)
	}
}

// Caddy's active health checks send none of the proxy's header
// operations: the group's api_key goes into theirs, so that a cloud's
// GET /v1/models, which wants the key, can be the check; an Authorization
// the checks set themselves stays.
func TestHealthChecksCarryTheGroupKey(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	var mu sync.Mutex
	seen := map[string][]string{} // stand-in: Authorization of its GET /v1/models
	cloud := func(name string) *simulator.Server {
		return standIn(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
				mu.Lock()
				seen[name] = append(seen[name], r.Header.Get("Authorization"))
				mu.Unlock()
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, cloudModel)
		})
	}
	a, b := cloud("a"), cloud("b")
	check := "\t\thealth_uri /v1/models\n\t\thealth_interval 100ms\n"
	e.load("group a {\n\tkind openai\n\tapi_key sk-key-of-a\n\tmodel_check off\n\tproxy " + a.URL() + " {\n" + check + "\t}\n}\n" +
		"group b {\n\tkind openai\n\tapi_key sk-key-of-b\n\tmodel_check off\n\tproxy " + b.URL() + " {\n" + check +
		"\t\thealth_headers {\n\t\t\tauthorization \"Bearer sk-checks-own\"\n\t\t}\n\t}\n}\n" +
		"alias spread {\n\ttarget a " + cloudModel + "\n\ttarget b " + cloudModel + "\n}\n")
	waitFor(t, "the health checks", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen["a"]) > 0 && len(seen["b"]) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if got := seen["a"][0]; got != "Bearer sk-key-of-a" {
		t.Errorf("a's health check sent Authorization %q, want the group's key", got)
	}
	if got := seen["b"][0]; got != "Bearer sk-checks-own" {
		t.Errorf("b's health check sent Authorization %q, want its health_headers' own", got)
	}
}
