// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The ledger survives a restart: a config without the gateway ends it
// (what Caddy does when it stops), and the next one with it reads back
// what Caddy's storage kept.
func TestLedgerSurvivesARestart(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := strings.Replace(defaultGateway, "\tkind vllm\n", "\tkind vllm\n\tcost {\n\t\tgpus 1\n\t\tgpu_cost_per_month 1000\n\t}\n", 1)
	e.load(block)
	gw := e.gatewayName()
	read := func() (tokens int, demand float64) {
		t.Helper()
		var doc struct {
			Gateways []struct {
				Tokens map[string]int `json:"tokens"`
				Demand float64        `json:"demand_gpu_seconds"`
			} `json:"gateways"`
		}
		if err := json.Unmarshal(adminGet(t, "/hybrid_llm/ledger?window=1h&gateway="+gw), &doc); err != nil || len(doc.Gateways) != 1 {
			t.Fatalf("ledger: %v %+v", err, doc)
		}
		return doc.Gateways[0].Tokens["prompt"] + doc.Gateways[0].Tokens["completion"], doc.Gateways[0].Demand
	}
	for range 5 {
		if group, _ := routeOf(t); group != "self" {
			t.Fatalf("answered by %q", group)
		}
	}
	tokens, demand := read()
	if tokens == 0 || demand <= 0 {
		t.Fatalf("before the restart: %d tokens, %v GPU-seconds", tokens, demand)
	}

	loadRaw(t, "{\n\tadmin localhost:2999\n\tskip_install_trust\n\thttp_port 9080\n}\nhttp://127.0.0.1:9080 {\n\trespond \"down\" 503\n}\n")
	e.load(block)
	again, againDemand := read()
	// the demand read back is summed anew: it may differ in its last bits
	if again < tokens || againDemand < demand*(1-1e-9) {
		t.Errorf("after the restart: %d tokens and %v GPU-seconds, before it %d and %v", again, againDemand, tokens, demand)
	}
}

// An attempt counts in the ledger until it ends: a request that holds
// one of four slots of a GPU for at least 1.2 s adds at least 0.3
// GPU-seconds of demand, and the ledger's window reaches its end (the
// end's time was once read when the attempt began, and the demand
// between the last tick and the end was lost).
func TestLedgerCountsAnAttemptToItsEnd(t *testing.T) {
	const ttft = 1200 * time.Millisecond
	e := newEnv(t, simulator.VLLMConfig{TTFT: ttft, MaxNumSeqs: 4}, simulator.CloudConfig{})
	e.load(vllmBlock("\tmax_num_seqs 4\n\tcost {\n\t\tgpus 1\n\t\tgpu_cost_per_month 1000\n\t}\n"))
	gw := e.gatewayName()
	read := func() (demand, covered float64) {
		t.Helper()
		var doc struct {
			Gateways []struct {
				Demand  float64 `json:"demand_gpu_seconds"`
				Covered float64 `json:"covered_seconds"`
			} `json:"gateways"`
		}
		if err := json.Unmarshal(adminGet(t, "/hybrid_llm/ledger?window=1h&gateway="+gw), &doc); err != nil || len(doc.Gateways) != 1 {
			t.Fatalf("ledger: %v %+v", err, doc)
		}
		return doc.Gateways[0].Demand, doc.Gateways[0].Covered
	}
	demand0, covered0 := read()
	began := time.Now()
	if group, _ := routeOf(t); group != "self" {
		t.Fatalf("answered by %q", group)
	}
	took := time.Since(began)
	demand, covered := read()
	if got, least := demand-demand0, ttft.Seconds()/4; got < least || got > took.Seconds()/4+1e-6 {
		t.Errorf("one request of %v on a quarter of a GPU added %.4f GPU-seconds, want %.4f to %.4f", took, got, least, took.Seconds()/4)
	}
	if covered-covered0 < ttft.Seconds() {
		t.Errorf("the ledger's window grew by %.3f s over a request of %v", covered-covered0, took)
	}
}
