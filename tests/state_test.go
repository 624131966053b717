// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

type stateDoc struct {
	Gateways []struct {
		Name    string `json:"name"`
		Aliases []struct {
			Name    string `json:"name"`
			Targets []struct{ Group, Model string }
		} `json:"aliases"`
		Groups []struct {
			Name      string   `json:"name"`
			Kind      string   `json:"kind"`
			Models    []string `json:"models"`
			Drained   bool     `json:"drained"`
			Endpoints []struct {
				Address       string         `json:"address"`
				Health        string         `json:"health"`
				Misconfigured []string       `json:"misconfigured"`
				ServedModels  map[string]int `json:"served_models"`
				InFlight      int64          `json:"in_flight"`
				RedLine       int64          `json:"red_line"`
				Metrics       struct {
					Fresh      bool     `json:"fresh"`
					AgeSeconds *float64 `json:"age_seconds"`
					Running    float64  `json:"running"`
				} `json:"metrics"`
				HealthScore *struct {
					Level string `json:"level"`
				} `json:"health_score"`
				ServePercent *int `json:"serve_percent"`
			} `json:"endpoints"`
			ModelCheck *struct {
				CheckedAt *string  `json:"checked_at"`
				Missing   []string `json:"missing"`
			} `json:"model_check"`
		} `json:"groups"`
	} `json:"gateways"`
}

func adminGet(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://localhost:2999" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

func getState(t *testing.T) stateDoc {
	t.Helper()
	var doc stateDoc
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// The admin state and the metrics show a misconfigured endpoint as such
// (healthy, yet excluded), and a cloud model name the cloud does not list.
func TestStateAndMetricsShowMisconfiguration(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ServedModelNames: []string{"llama-3.1-8b"}, MaxNumSeqs: 8}, simulator.CloudConfig{})
	block := strings.Replace(vllmBlock("\tmax_num_seqs 8\n\tmax_queue 2\n"), "target cloud "+cloudModel+"\n}\nalias cloud-first", "target cloud gpt-4o-typo\n}\nalias cloud-first", 1)
	e.load(block)

	var doc stateDoc
	waitFor(t, "the probes and the model check", func() bool {
		doc = getState(t)
		if len(doc.Gateways) != 1 || len(doc.Gateways[0].Groups) != 2 {
			return false
		}
		g := doc.Gateways[0]
		cloud, self := g.Groups[0], g.Groups[1]
		return len(self.Endpoints) == 1 && self.Endpoints[0].ServedModels != nil && self.Endpoints[0].Metrics.Fresh &&
			self.Endpoints[0].Health == "up" && cloud.ModelCheck != nil && cloud.ModelCheck.CheckedAt != nil
	})
	g := doc.Gateways[0]
	if g.Name != e.gatewayName() || len(g.Aliases) != 2 || g.Aliases[0].Name != "chat-main" || len(g.Aliases[0].Targets) != 2 {
		t.Errorf("gateway %+v", g)
	}
	cloud, self := g.Groups[0], g.Groups[1]
	ep := self.Endpoints[0]
	if self.Kind != "vllm" || ep.Address != e.selfSrv.Addr() || ep.RedLine != 10 || ep.InFlight != 0 {
		t.Errorf("self %+v", self)
	}
	if len(ep.Misconfigured) != 1 || ep.Misconfigured[0] != selfModel || ep.ServedModels["llama-3.1-8b"] != 32768 {
		t.Errorf("misconfigured %v served %v", ep.Misconfigured, ep.ServedModels)
	}
	if len(cloud.ModelCheck.Missing) != 1 || cloud.ModelCheck.Missing[0] != "gpt-4o-typo" {
		t.Errorf("model check %+v", cloud.ModelCheck)
	}

	metrics := string(adminGet(t, "/metrics"))
	gw := `gateway="` + e.gatewayName() + `"`
	for _, want := range []string{
		`caddy_hybrid_llm_endpoint_up{endpoint="` + ep.Address + `",` + gw + `,group="self"} 1`,
		`caddy_hybrid_llm_endpoint_misconfigured{endpoint="` + ep.Address + `",` + gw + `,group="self",model="` + selfModel + `"} 1`,
		`caddy_hybrid_llm_endpoint_red_line_requests{endpoint="` + ep.Address + `",` + gw + `,group="self"} 10`,
		`caddy_hybrid_llm_model_listed{` + gw + `,group="cloud",model="gpt-4o-typo"} 0`,
		`caddy_hybrid_llm_model_listed{` + gw + `,group="cloud",model="` + cloudModel + `"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(metrics, cloudKey) {
		t.Error("metrics hold the cloud key")
	}
}

func TestTwoGatewaysWithOneNameAreRefused(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	cfg := strings.NewReplacer("{SELF}", e.selfSrv.URL(), "{CLOUD}", e.cloudSrv.URL()).Replace(plainGlobals + `http://127.0.0.1:9080 {
	handle /a/* {
		hybrid_llm {
` + defaultGateway + `
		}
	}
	handle /b/* {
		hybrid_llm {
` + defaultGateway + `
		}
	}
}
`)
	resp, err := http.Post("http://localhost:2999/load", "text/caddyfile", strings.NewReader(cfg))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 || !strings.Contains(string(b), `two hybrid_llm handlers named \"default\" in one config`) {
		t.Errorf("load: %d %s", resp.StatusCode, b)
	}
	// the old config still runs
	if r, _ := post(t, "/v1/chat/completions", chatBody); r.StatusCode != 200 {
		t.Errorf("after the refused load: %d", r.StatusCode)
	}
}
