// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// weightedAlias serves the alias spread by self and cloud, 60 to 40, with
// cloud-first as a last target after the set.
func weightedAlias(selfWeight, cloudWeight string) string {
	return "alias spread {\n\tweighted {\n\t\ttarget self " + selfModel + " {\n\t\t\tweight " + selfWeight + "\n\t\t}\n" +
		"\t\ttarget cloud " + cloudModel + " {\n\t\t\tweight " + cloudWeight + "\n\t\t}\n\t}\n}\n"
}

// A weighted set splits an alias's traffic by weight, and a member that
// fails hands the request to another member.
func TestWeightedSetSplitsByWeight(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway + weightedAlias("60", "40"))
	spread := strings.Replace(chatBody, "chat-main", "spread", 1)
	counts := map[string]int{}
	const n = 1000
	for range n {
		resp, body := post(t, "/v1/chat/completions", spread)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		counts[resp.Header.Get("X-Hybrid-Target")]++
	}
	t.Logf("split over %d requests: %v", n, counts)
	if share := float64(counts["self"]) / n; share < 0.55 || share > 0.65 {
		t.Errorf("self got %.1f%% of the requests, want 60 ± 5", share*100)
	}

	// self down: every request goes to the other member
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		resp, body := post(t, "/v1/chat/completions", spread)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "cloud" {
			t.Fatalf("request %d with self down: %d from %q: %s", i, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
	}
}

// A member of weight 0 takes no request; a set whose members are all at
// 0 is passed over for the targets after it.
func TestWeightZeroTakesNoRequests(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway + weightedAlias("0", "1"))
	spread := strings.Replace(chatBody, "chat-main", "spread", 1)
	before := len(e.selfPosts())
	for range 20 {
		if resp, _ := post(t, "/v1/chat/completions", spread); resp.Header.Get("X-Hybrid-Target") != "cloud" {
			t.Fatalf("weight 0 got a request: %q", resp.Header.Get("X-Hybrid-Target"))
		}
	}
	if n := len(e.selfPosts()) - before; n != 0 {
		t.Errorf("self, at weight 0, got %d requests", n)
	}

	e.load(defaultGateway + strings.Replace(weightedAlias("0", "0"), "\t}\n}\n", "\t}\n\ttarget self "+selfModel+"\n}\n", 1))
	if resp, body := post(t, "/v1/chat/completions", spread); resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("a set at 0 was not passed over: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
}

// A weight set through the admin API takes effect at once and lasts
// across a reload that keeps the config's weight; a config that changes
// the weight wins.
func TestWeightThroughTheAdminAPI(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway + weightedAlias("60", "40"))
	spread := strings.Replace(chatBody, "chat-main", "spread", 1)
	setWeight := func(group string, w int) {
		t.Helper()
		body := `{"gateway":"` + e.gatewayName() + `","alias":"spread","group":"` + group + `","weight":` + strconv.Itoa(w) + `}`
		if code, b := adminPost(t, "/hybrid_llm/weight", "application/json", body); code != 200 {
			t.Fatalf("weight: %d %s", code, b)
		}
	}
	onlyCloud := func(when string) {
		t.Helper()
		for range 10 {
			if resp, _ := post(t, "/v1/chat/completions", spread); resp.Header.Get("X-Hybrid-Target") != "cloud" {
				t.Fatalf("%s: a request went to %q", when, resp.Header.Get("X-Hybrid-Target"))
			}
		}
	}
	setWeight("self", 0)
	onlyCloud("self at 0")
	var st struct {
		Gateways []struct {
			Name    string `json:"name"`
			Aliases []struct {
				Name    string `json:"name"`
				Targets []struct {
					Group            string `json:"group"`
					Weight           *int   `json:"weight"`
					ConfiguredWeight *int   `json:"configured_weight"`
				} `json:"targets"`
			} `json:"aliases"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &st); err != nil {
		t.Fatal(err)
	}
	shown := false
	for _, g := range st.Gateways {
		for _, a := range g.Aliases {
			for _, tg := range a.Targets {
				if g.Name == e.gatewayName() && a.Name == "spread" && tg.Group == "self" {
					shown = tg.Weight != nil && *tg.Weight == 0 && tg.ConfiguredWeight != nil && *tg.ConfiguredWeight == 60
				}
			}
		}
	}
	if !shown {
		t.Error("the state does not show self's weight 0 of 60 configured")
	}

	e.load(defaultGateway + weightedAlias("60", "40") + "alias other {\n\ttarget cloud " + cloudModel + "\n}\n")
	onlyCloud("after a reload that keeps the weight")

	e.load(defaultGateway + weightedAlias("70", "30"))
	selfSeen := false
	for range 10 {
		resp, _ := post(t, "/v1/chat/completions", spread)
		selfSeen = selfSeen || resp.Header.Get("X-Hybrid-Target") == "self"
	}
	if !selfSeen {
		t.Error("a config that changed the weight did not win over the admin API's")
	}
	if code, _ := adminPost(t, "/hybrid_llm/weight", "application/json", `{"gateway":"`+e.gatewayName()+`","alias":"spread","group":"nope","weight":1}`); code != 404 {
		t.Errorf("an unknown member: %d", code)
	}
}
