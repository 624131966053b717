// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// strategyBlock is alias spread over clouds a and b, 50/50, leaning by
// strategy; groups carries each group's extra lines.
func strategyBlock(t *testing.T, strategy string, aTTFT, bTTFT time.Duration, aExtra, bExtra string) string {
	t.Helper()
	group := func(name string, ttft time.Duration, extra string) string {
		c := simulator.NewCloud(simulator.CloudConfig{Models: []string{cloudModel}, APIKey: cloudKey, TTFT: ttft})
		srv, err := simulator.Start("127.0.0.1:0", c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		return "group " + name + " {\n\tkind openai\n\tapi_key " + cloudKey + "\n\tmodel_check off\n" + extra + "\n\tproxy " + srv.URL() + "\n}\n"
	}
	return group("a", aTTFT, aExtra) + group("b", bTTFT, bExtra) +
		"alias spread {\n\tweighted clouds {\n\t\tstrategy " + strategy + "\n" +
		"\t\ttarget a " + cloudModel + " {\n\t\t\tweight 50\n\t\t}\n" +
		"\t\ttarget b " + cloudModel + " {\n\t\t\tweight 50\n\t\t}\n\t}\n}\n"
}

// spreadWeights reads the weights the members of spread serve at now,
// and the set's strategy.
func spreadWeights(t *testing.T, gw string) (map[string]int, string) {
	t.Helper()
	out, strategy := map[string]int{}, ""
	for group, m := range spreadMembers(t, gw) {
		out[group], strategy = *m.Weight, m.Strategy
	}
	return out, strategy
}

// strategy latency leans the set towards the member answering sooner:
// the slower member keeps a share of its weight (a tenth at least), so
// that it is still measured.
func TestStrategyLatencyLeansToTheFasterMember(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strategyBlock(t, "latency", 80*time.Millisecond, 0, "", ""))
	gw := e.gatewayName()
	if w, s := spreadWeights(t, gw); w["a"] != 50 || w["b"] != 50 || s != "latency" {
		t.Fatalf("before any answer: %v, strategy %q", w, s)
	}
	send(t, 24) // both measured
	waitFor(t, "the set to lean towards b", func() bool {
		w, _ := spreadWeights(t, gw)
		return w["a"] < 50 && w["b"] == 50
	})
	w, _ := spreadWeights(t, gw)
	counts := send(t, 200)
	t.Logf("weights %v; split of 200 requests: %v", w, counts)
	if counts["a"] == 0 || counts["a"] > 60 {
		t.Errorf("the slower member got %d of 200 requests, want some but at most 60", counts["a"])
	}
}

// strategy cost leans the set towards the cheaper member, by its group's
// token prices.
func TestStrategyCostLeansToTheCheaperMember(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strategyBlock(t, "cost", 0, 0,
		"\tcost {\n\t\tinput_per_million 2.5\n\t\toutput_per_million 10\n\t}",
		"\tcost {\n\t\tinput_per_million 0.15\n\t\toutput_per_million 0.6\n\t}"))
	w, s := spreadWeights(t, e.gatewayName())
	if s != "cost" || w["b"] != 50 || w["a"] != 5 {
		t.Fatalf("weights %v (strategy %q), want a leaned to a tenth of 50 and b whole", w, s)
	}
	counts := send(t, 220)
	t.Logf("split of 220 requests: %v", counts)
	if counts["a"] < 5 || counts["a"] > 40 {
		t.Errorf("the dearer member got %d of 220 requests, want about 20", counts["a"])
	}
}
