// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// A vLLM that takes requests and never answers holds nobody: a stream
// falls back once its first byte is late, a non-stream request once its
// attempt has taken too long, and the red-line slot each held comes back.
// Targets that set no limit get the defaults, shown in the admin state.
func TestUpstreamThatNeverAnswers(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "target self "+selfModel+"\n",
		"target self "+selfModel+" {\n\t\tfirst_byte_timeout 300ms\n\t\ttimeout 600ms\n\t}\n", 1))
	e.self.SetFailures(simulator.Failures{Stall: time.Hour}) // probes still pass

	for _, tc := range []struct{ name, body, reason string }{
		{"stream", streamBody, "self:first_byte_timeout"},
		{"non-stream", chatBody, "self:timeout"},
	} {
		resp, body := post(t, "/v1/chat/completions", tc.body)
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" || !strings.Contains(string(body), "tok0") {
			t.Errorf("%s: %d %s %s", tc.name, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
		if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != tc.reason {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.reason)
		}
		waitNoInFlight(t)
	}
	if n := len(e.selfPosts()); n != 2 {
		t.Errorf("self got %d requests, want 2", n)
	}

	var doc struct {
		Gateways []struct {
			Name    string `json:"name"`
			Aliases []struct {
				Name    string `json:"name"`
				Targets []struct {
					Group     string  `json:"group"`
					Timeout   float64 `json:"timeout_seconds"`
					FirstByte float64 `json:"first_byte_timeout_seconds"`
				} `json:"targets"`
			} `json:"aliases"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.Gateways {
		if g.Name != e.gatewayName() {
			continue
		}
		for _, al := range g.Aliases {
			if al.Name != "chat-main" {
				continue
			}
			if self, cloud := al.Targets[0], al.Targets[1]; self.Timeout != 0.6 || self.FirstByte != 0.3 ||
				cloud.Timeout != 600 || cloud.FirstByte != 60 {
				t.Errorf("limits in the state: %+v", al.Targets)
			}
			return
		}
	}
	t.Error("chat-main is not in the state")
}

// A stream is held for its first body byte (so that a late one can still
// fall back); an answer that has no body is passed on whole when it ends.
func TestBodilessAnswerToAStreamIsPassedOn(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	srv, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	e.load(withPlainSelf(defaultGateway, srv.URL()))
	resp, body := post(t, "/v1/chat/completions", streamBody)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Hybrid-Target") != "self" || len(body) != 0 {
		t.Errorf("%d %s %q", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("the cloud got %d requests", n)
	}
}

// A time limit spent on one replica is not spent again on another: with
// two wedged replicas (and the default retry of a group of several), the
// stream goes to the next target after one first-byte limit, not two.
func TestTimeLimitIsNotRetriedOnAnotherReplica(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	other, srv := secondSelf(t)
	block := strings.Replace(defaultGateway, "proxy {SELF}\n", "proxy {SELF} "+srv.URL()+"\n", 1)
	e.load(strings.Replace(block, "target self "+selfModel+"\n",
		"target self "+selfModel+" {\n\t\tfirst_byte_timeout 300ms\n\t}\n", 1))
	for _, v := range []*simulator.VLLM{e.self, other} {
		v.SetFailures(simulator.Failures{Stall: time.Hour}) // probes still pass
	}
	resp, body := post(t, "/v1/chat/completions", streamBody)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != "self:first_byte_timeout" {
		t.Errorf("reason %q, want one first-byte limit on self", got)
	}
	waitNoInFlight(t)
}
