// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// A config that fails to start (its listener address is taken) leaves the
// running config serving, and fully managed: the admin state still shows
// its gateway, a drain still finds it, and its ledger keeps sampling.
func TestFailedLoadKeepsTheRunningGatewayManaged(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	gw := e.gatewayName()

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	// the running config, plus a server on the taken address
	var cfg map[string]any
	if err := json.Unmarshal(adminGet(t, "/config/"), &cfg); err != nil {
		t.Fatal(err)
	}
	servers := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)
	servers["taken"] = map[string]any{"listen": []string{taken.Addr().String()}}
	bad, _ := json.Marshal(cfg)
	if code, b := adminPost(t, "/load", "application/json", string(bad)); code == 200 {
		t.Fatalf("a config listening on a taken address loaded: %s", b)
	}

	// the failed config started a server on the gateway's shared listener
	// and shut it down: a connection it accepted as it stopped is closed
	// unanswered, and a client retries it (the OpenAI SDKs do, twice); the
	// next request dials afresh
	client.CloseIdleConnections()
	var resp *http.Response
	for try := 0; resp == nil; try++ {
		req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		if resp, err = client.Do(req); err != nil && try == 2 {
			t.Fatalf("the running config does not answer: %v", err)
		}
	}
	_ = resp.Body.Close()
	if group := resp.Header.Get("X-Hybrid-Target"); resp.StatusCode != http.StatusOK || group != "self" {
		t.Errorf("the running config does not serve: %d %s", resp.StatusCode, group)
	}
	found := false
	for _, g := range getState(t).Gateways {
		found = found || g.Name == gw
	}
	if !found {
		t.Fatalf("the state lost the running gateway: %s", adminGet(t, "/hybrid_llm/state"))
	}

	// the ledger keeps sampling the running gateway
	covered := func() float64 {
		var doc struct {
			Gateways []struct {
				Covered float64 `json:"covered_seconds"`
			} `json:"gateways"`
		}
		if err := json.Unmarshal(adminGet(t, "/hybrid_llm/ledger?gateway="+gw), &doc); err != nil || len(doc.Gateways) != 1 {
			t.Fatalf("ledger: %v %+v", err, doc)
		}
		return doc.Gateways[0].Covered
	}
	before := covered()
	waitFor(t, "the ledger to sample", func() bool { return covered() > before })

	if code, b := adminPost(t, "/hybrid_llm/drain", "application/json", `{"gateway":"`+gw+`","group":"self"}`); code != 200 {
		t.Fatalf("drain: %d %s", code, b)
	}
	if group, reason := routeOf(t); group != "cloud" || reason != "self:drained" {
		t.Errorf("while drained: %s (%s)", group, reason)
	}
	if !drainedIn(getState(t), "self") {
		t.Error("the state does not show the drain")
	}
	if code, b := adminPost(t, "/hybrid_llm/undrain", "application/json", `{"gateway":"`+gw+`","group":"self"}`); code != 200 {
		t.Fatalf("undrain: %d %s", code, b)
	}
}
