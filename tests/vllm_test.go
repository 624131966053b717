// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// vllmBlock is defaultGateway with the self group's options replaced.
func vllmBlock(selfOptions string) string {
	return strings.Replace(defaultGateway, `	# one health probe at start: tests break the upstream themselves
	probe {
		health_interval 1m
	}
`, selfOptions, 1)
}

// routeOf sends a chat request and returns the group that answered and
// the fallback reason.
func routeOf(t *testing.T) (string, string) {
	t.Helper()
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason")
}

// wantSelfSkipped sends n chat requests and checks that each was answered
// by the cloud after self was skipped for reason, and that self got none.
func (e *env) wantSelfSkipped(n int, reason string) {
	e.t.Helper()
	before := len(e.selfPosts())
	for range n {
		if group, got := routeOf(e.t); group != "cloud" || got != reason {
			e.t.Errorf("%s (%s), want cloud after %s", group, got, reason)
		}
	}
	if d := len(e.selfPosts()) - before; d != 0 {
		e.t.Errorf("self got %d requests while skipped (%s)", d, reason)
	}
}

// At the red line (max_num_seqs + max_queue in flight to the endpoint)
// the next request goes to the next target, with the cloud's model name,
// and nothing fails; traffic returns once a slot is free.
func TestRedLineOverflowsToNextTarget(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{MaxNumSeqs: 4, TTFT: 300 * time.Millisecond}, simulator.CloudConfig{})
	e.load(vllmBlock("\tmax_num_seqs 1\n\tmax_queue 1\n"))

	// two in flight: the red line of 1 + 1
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := post(t, "/v1/chat/completions", chatBody)
			if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" {
				t.Errorf("held request: %d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
			}
		}()
	}
	waitFor(t, "two requests in flight at self", func() bool { return len(e.selfPosts()) == 2 })
	group, reason := routeOf(t)
	if group != "cloud" || reason != "self:red_line" {
		t.Errorf("third request: %s (%s), want cloud (self:red_line)", group, reason)
	}
	if got := models(e.cloudPosts()); len(got) != 1 || got[0] != cloudModel {
		t.Errorf("cloud received %v", got)
	}
	wg.Wait()
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("after the burst: %s, want self", group)
	}
}

// A replica whose /health turns 503 stops receiving requests, and
// receives them again once it recovers.
func TestUnhealthyReplicaIsSkippedAndReturns(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(vllmBlock("\tprobe {\n\t\thealth_interval 50ms\n\t}\n"))
	if group, _ := routeOf(t); group != "self" {
		t.Fatalf("healthy: %s", group)
	}

	e.self.SetHealthy(false)
	waitFor(t, "the replica to be taken out", func() bool {
		group, _ := routeOf(t)
		return group == "cloud"
	})
	e.wantSelfSkipped(5, "self:unhealthy")

	e.self.SetHealthy(true)
	waitFor(t, "the replica to come back", func() bool {
		group, _ := routeOf(t)
		return group == "self"
	})
}

// A replica that serves another model name than configured is
// misconfigured: skipped, though healthy.
func TestMisconfiguredReplicaIsSkipped(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ServedModelNames: []string{"llama-3.1-8b"}}, simulator.CloudConfig{})
	e.load(defaultGateway)

	waitFor(t, "the models probe", func() bool {
		_, reason := routeOf(t)
		return reason == "self:misconfigured"
	})
	for _, m := range models(e.selfPosts()) {
		t.Errorf("the misconfigured replica was sent %q", m)
	}
}

// Stale metrics count as saturated by default, and as fine when
// configured so. Two groups share one replica (and so one prober); its
// /metrics starts failing.
func TestStaleMetrics(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	var broken atomic.Bool
	wrapped, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() && r.URL.Path == "/metrics" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		e.self.ServeHTTP(w, r)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer wrapped.Close()
	e.selfSrv = wrapped
	probe := "\tprobe {\n\t\tmetrics_interval 50ms\n\t\tstale_after 300ms\n\t\tunknown_metrics %s\n\t}\n"
	block := vllmBlock(fmt.Sprintf(probe, "saturated")) + `
group self-ok {
	kind vllm
	proxy {SELF}
` + fmt.Sprintf(probe, "ok") + `}
alias tolerant {
	target self-ok ` + selfModel + `
	target cloud ` + cloudModel + `
}
`
	e.load(block)
	tolerant := strings.Replace(chatBody, "chat-main", "tolerant", 1)
	waitFor(t, "fresh metrics", func() bool {
		group, _ := routeOf(t)
		return group == "self"
	})

	broken.Store(true)
	waitFor(t, "the metrics to go stale", func() bool {
		_, reason := routeOf(t)
		return reason == "self:stale_metrics"
	})
	resp, body := post(t, "/v1/chat/completions", tolerant)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self-ok" {
		t.Errorf("unknown_metrics ok: %d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}

	broken.Store(false)
	waitFor(t, "fresh metrics again", func() bool {
		group, _ := routeOf(t)
		return group == "self"
	})
}

// The policy works in a plain reverse_proxy too.
func TestPolicyInPlainReverseProxy(t *testing.T) {
	down := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{selfModel}})
	up := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{selfModel}})
	down.SetHealthy(false)
	var srvs []*simulator.Server
	for _, h := range []http.Handler{down, up} {
		s, err := simulator.Start("127.0.0.1:0", h)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		srvs = append(srvs, s)
	}
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.tester = nil
	cfg := plainGlobals + `http://127.0.0.1:9080 {
	reverse_proxy ` + srvs[0].Addr() + " " + srvs[1].Addr() + ` {
		lb_policy vllm_least_load 8 {
			model ` + selfModel + `
			probe {
				health_interval 50ms
			}
		}
	}
}
`
	loadRaw(t, cfg)
	// the first requests start the probers; then the down one is skipped
	waitFor(t, "the down replica to be probed", func() bool {
		post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", selfModel, 1))
		return len(posts(up.Requests())) > 0
	})
	before := len(posts(down.Requests()))
	for range 5 {
		resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", selfModel, 1))
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if n := len(posts(down.Requests())); n != before {
		t.Errorf("the down replica got %d requests", n-before)
	}
}

// A cloud model name the cloud does not serve is reported at start-up,
// long before a fallback needs it.
func TestCloudModelCheckReportsWrongName(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	logPath := filepath.Join(t.TempDir(), "gateway.log")
	block := strings.Replace(defaultGateway, "target cloud "+cloudModel+"\n}\nalias cloud-first", "target cloud gpt-4o-typo\n}\nalias cloud-first", 1)
	e.loadWithGlobal(block, "log gateway {\n\t\toutput file "+logPath+"\n\t\tformat json\n\t\tinclude http.handlers.hybrid_llm\n\t}")
	waitFor(t, "the model check's report", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "does not list configured model names") && strings.Contains(string(b), "gpt-4o-typo")
	})
	b, _ := os.ReadFile(logPath)
	if strings.Contains(string(b), cloudKey) {
		t.Error("the log holds the cloud key")
	}
}

// An https vLLM whose certificate no public CA signed, reached with the
// group's `transport http { tls_insecure_skip_verify }`: the probes go
// through that same transport, so the endpoint probes up and serves.
func TestTLSEndpointProbesThroughTheGroupTransport(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	v := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{selfModel}})
	srv := httptest.NewUnstartedServer(v)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	e.load(strings.Replace(defaultGateway, "proxy {SELF}\n",
		"proxy "+srv.URL+" {\n\t\ttransport http {\n\t\t\ttls_insecure_skip_verify\n\t\t}\n\t}\n", 1))

	for _, ep := range getState(t).Gateways[0].Groups[0].Endpoints {
		if ep.Health != "up" || ep.ServedModels == nil {
			t.Fatalf("the TLS endpoint probes %s, models %v", ep.Health, ep.ServedModels)
		}
	}
	if group, reason := routeOf(t); group != "self" {
		t.Errorf("answered by %s (%s)", group, reason)
	}
	if n := len(posts(v.Requests())); n != 1 {
		t.Errorf("the TLS endpoint got %d requests", n)
	}
}
