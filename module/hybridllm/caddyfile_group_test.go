// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalVLLMGroupOptions(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hybrid_llm {
		group self {
			kind vllm
			max_num_seqs 64
			max_queue 8
			endpoint 127.0.0.1:8003 {
				max_num_seqs 128
				weight 2.5
			}
			probe {
				health_interval 1s
				metrics_interval 250ms
				models_interval 1m
				timeout 500ms
				stale_after 3s
				unknown_metrics ok
				ttft_window 1m
				rise 3
				fall 4
			}
			breaker {
				cooldown 1m
				uneject_on_probe off
			}
			proxy 127.0.0.1:8001 127.0.0.1:8003
		}
		group cloud {
			kind openai
			model_check 10m
			proxy https://api.cloud.example
		}
		group other {
			kind openai
			model_check off
			proxy https://api.other.example
		}
		alias a {
			target self m
			target cloud n
			target other o
		}
	}`)
	var g Gateway
	if err := g.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	self := g.Groups["self"]
	if self.MaxNumSeqs != 64 || self.MaxQueue != 8 {
		t.Errorf("red line: %d + %d", self.MaxNumSeqs, self.MaxQueue)
	}
	if ec := self.Endpoints["127.0.0.1:8003"]; ec == nil || ec.MaxNumSeqs != 128 || ec.Weight != 2.5 {
		t.Errorf("endpoint: %+v", ec)
	}
	want := ProbeConfig{
		HealthInterval: caddy.Duration(time.Second), MetricsInterval: caddy.Duration(250 * time.Millisecond),
		ModelsInterval: caddy.Duration(time.Minute), Timeout: caddy.Duration(500 * time.Millisecond),
		StaleAfter: caddy.Duration(3 * time.Second), UnknownMetrics: "ok", TTFTWindow: caddy.Duration(time.Minute),
		Rise: 3, Fall: 4,
	}
	if self.Probe == nil || *self.Probe != want {
		t.Errorf("probe: %+v", self.Probe)
	}
	if bc := self.Breaker; bc == nil || bc.Cooldown != caddy.Duration(time.Minute) || bc.ProbesEndCooldown() {
		t.Errorf("breaker: %+v", bc)
	}
	if g.Groups["cloud"].ModelCheck != "10m" || g.Groups["other"].ModelCheck != "off" {
		t.Errorf("model_check: %+v %+v", g.Groups["cloud"], g.Groups["other"])
	}
}

func TestUnmarshalVLLMGroupErrors(t *testing.T) {
	const alias = "\nalias a {\ntarget g m\n}\n}"
	for _, tc := range []struct{ name, group, want string }{
		{"red line on a cloud", "kind openai\nmax_num_seqs 8\nproxy 127.0.0.1:1", "apply to groups of kind vllm only"},
		{"model_check on vllm", "kind vllm\nmodel_check 1m\nproxy 127.0.0.1:1", "model_check applies to cloud groups (kind openai or anthropic) only"},
		{"bad max_num_seqs", "kind vllm\nmax_num_seqs 0\nproxy 127.0.0.1:1", "invalid max_num_seqs '0'"},
		{"bad max_queue", "kind vllm\nmax_queue -1\nproxy 127.0.0.1:1", "invalid max_queue '-1'"},
		{"bad weight", "kind vllm\nendpoint 127.0.0.1:1 {\nweight zero\n}\nproxy 127.0.0.1:1", "invalid weight 'zero'"},
		{"bad unknown_metrics", "kind vllm\nprobe {\nunknown_metrics maybe\n}\nproxy 127.0.0.1:1", "unknown_metrics must be 'saturated' or 'ok'"},
		{"unknown probe option", "kind vllm\nprobe {\ncadence 1s\n}\nproxy 127.0.0.1:1", "unrecognized probe option 'cadence'"},
		{"bad probe duration", "kind vllm\nprobe {\nhealth_interval often\n}\nproxy 127.0.0.1:1", "invalid health_interval 'often'"},
		{"bad rise", "kind vllm\nprobe {\nrise 0\n}\nproxy 127.0.0.1:1", "invalid rise '0'"},
		{"fall twice", "kind vllm\nprobe {\nfall 2\nfall 3\n}\nproxy 127.0.0.1:1", "fall already specified"},
		{"bad uneject_on_probe", "kind vllm\nbreaker {\nuneject_on_probe maybe\n}\nproxy 127.0.0.1:1", "uneject_on_probe must be 'on' or 'off'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Gateway
			err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hybrid_llm {\ngroup g {\n" + tc.group + "\n}" + alias))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A cloud's key goes over TLS or stays on a private network: an upstream
// on a public network written without a scheme, which reverse_proxy dials
// over plain HTTP, is refused when the group sends credentials.
func TestUnmarshalCloudUpstreamWithoutScheme(t *testing.T) {
	const alias = "\nalias a {\ntarget g m\n}\n}"
	parse := func(group string) error {
		var g Gateway
		return g.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hybrid_llm {\ngroup g {\n" + group + "\n}" + alias))
	}
	for _, tc := range []struct{ name, group, want string }{
		{"api_key", "kind openai\napi_key {env.K}\nproxy api.openai.com", "proxy upstream api.openai.com has no scheme, so its API key would go over plain HTTP: write https://api.openai.com"},
		{"api_key before a later proxy", "kind openai\nproxy 127.0.0.1:8002 api.openai.com:443\napi_key {env.K}", "write https://api.openai.com"},
		{"header_up", "kind openai\nproxy api.cloud.example:8443 {\nheader_up Api-Key {env.K}\n}", "write https://api.cloud.example:8443"},
		{"to", "kind openai\napi_key {env.K}\nproxy {\nto 8.8.8.8:80\n}", "proxy upstream 8.8.8.8:80 has no scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := parse(tc.group); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	for _, group := range []string{
		"kind openai\napi_key {env.K}\nproxy 127.0.0.1:8002",
		"kind openai\napi_key {env.K}\nproxy cloud-sim:8002 10.0.0.7:8000 api.svc.cluster.local",
		"kind openai\napi_key {env.K}\nproxy https://api.openai.com",
		"kind openai\napi_key {env.K}\nproxy api.openai.com:443 {\ntransport http {\ntls\n}\n}",
		"kind openai\nproxy api.openai.com", // no credentials to expose
		"kind vllm\nproxy gpu.example.com:8000",
		"kind openai\napi_key {env.K}\nproxy {$CLOUD_UPSTREAM}",
	} {
		if err := parse(group); err != nil {
			t.Errorf("%q: %v", group, err)
		}
	}
}
