// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/tidwall/gjson"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hybrid_llm {
		max_body_size 1MiB
		deadline 90s
		route_headers off
		group self {
			kind vllm
			proxy 127.0.0.1:8001 127.0.0.1:8003 {
				lb_policy least_conn
				health_uri /health
			}
		}
		group cloud {
			kind openai
			api_key {env.CLOUD_API_KEY}
			stream_usage off
			proxy https://api.cloud.example {
				header_up X-Extra yes
			}
		}
		alias chat-main {
			target self qwen2.5-7b-instruct {
				timeout 20s
				fallback_on 429 5xx 401 404
				first_byte_timeout off
			}
			target cloud gpt-4o-mini
		}
		alias embed {
			target cloud text-embedding-3-small
		}
	}`)
	var g Gateway
	if err := g.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if g.MaxBodySize != 1<<20 || g.Deadline != caddy.Duration(90*time.Second) || g.routeHeadersOn() {
		t.Errorf("globals: max_body_size=%d deadline=%v route_headers=%v", g.MaxBodySize, g.Deadline, g.RouteHeaders)
	}
	self, cloud := g.Groups["self"], g.Groups["cloud"]
	if self == nil || cloud == nil {
		t.Fatalf("groups: %v", g.Groups)
	}
	if self.Kind != KindVLLM || cloud.Kind != KindOpenAI || cloud.APIKey != "{env.CLOUD_API_KEY}" {
		t.Errorf("group fields: self=%+v cloud=%+v", self, cloud)
	}
	if self.StreamUsage != nil || cloud.StreamUsage == nil || *cloud.StreamUsage {
		t.Errorf("stream_usage: self %v, cloud %v; want unset and off", self.StreamUsage, cloud.StreamUsage)
	}
	if n := gjson.GetBytes(self.ProxyRaw, "upstreams.#").Int(); n != 2 {
		t.Errorf("self upstreams: %d in %s", n, self.ProxyRaw)
	}
	if p := gjson.GetBytes(self.ProxyRaw, "load_balancing.selection_policy.policy").String(); p != "least_conn" {
		t.Errorf("self lb_policy: %q", p)
	}
	if !gjson.GetBytes(cloud.ProxyRaw, "transport.tls").Exists() || gjson.GetBytes(cloud.ProxyRaw, "headers.request.set.X-Extra.0").String() != "yes" {
		t.Errorf("an https upstream should get TLS and keep its header_up, proxy: %s", cloud.ProxyRaw)
	}
	al := g.Aliases["chat-main"]
	if al == nil || len(al.Targets) != 2 {
		t.Fatalf("alias: %+v", al)
	}
	if tg := al.Targets[0]; tg.Group != "self" || tg.Model != "qwen2.5-7b-instruct" || tg.Timeout == nil || *tg.Timeout != caddy.Duration(20*time.Second) || tg.FirstByteTimeout == nil || *tg.FirstByteTimeout != 0 {
		t.Errorf("target 0: %+v", tg)
	}
	if got := al.Targets[0].FallbackOn; !slices.Equal(got, []int{429, 5, 401, 404}) {
		t.Errorf("target 0 fallback_on: %v", got)
	}
	if tg := al.Targets[1]; tg.Group != "cloud" || tg.Model != "gpt-4o-mini" || tg.Timeout != nil || tg.FirstByteTimeout != nil || tg.FallbackOn != nil {
		t.Errorf("target 1: %+v", tg)
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	const self = `
	group self {
		kind vllm
		proxy 127.0.0.1:8001
	}
`
	const alias = `
	alias a {
		target self m
	}
`
	for _, tc := range []struct {
		name, input, want string
	}{
		{"argument on directive", "hybrid_llm foo {" + self + alias + "}", "wrong argument count"},
		{"unknown subdirective", "hybrid_llm {" + self + alias + "\tfrobnicate 1\n}", "unrecognized hybrid_llm subdirective 'frobnicate'"},
		{"no groups", "hybrid_llm {" + alias + "}", "needs at least one group"},
		{"no alias", "hybrid_llm {" + self + "}", "needs at least one alias"},
		{"unknown group", "hybrid_llm {" + self + "alias a {\ntarget cloud m\n}\n}", "target refers to unknown group 'cloud' (the groups: self), at Testfile:7"},
		{"unknown color group", "hybrid_llm {" + self + "alias a {\ntarget self m\ncolor blue canary m\n}\n}", "color refers to unknown group 'canary' (the groups: self), at Testfile:8"},
		{"route to a group not among the targets", "hybrid_llm {" + self + "group cloud {\nkind openai\nproxy http://127.0.0.1:1\n}\nalias a {\ntarget self m\nroute cloud {\nprompt_tokens_over 100\n}\n}\n}",
			"route sends to group 'cloud', which is not among the alias's targets (self), at Testfile:12"},
		{"vllm group without upstream", "hybrid_llm {\ngroup self {\nkind vllm\nproxy {\nlb_retries 1\n}\n}" + alias + "}", "group 'self' of kind vllm has no upstream: give its vLLM servers' addresses (proxy 10.0.0.5:8000 ...), at Testfile:2"},
		{"target without model", "hybrid_llm {" + self + "alias a {\ntarget self\n}\n}", "target needs a group and a model name"},
		{"alias without targets", "hybrid_llm {" + self + "alias a {\n}\n}", "alias 'a' has no targets"},
		{"duplicate alias", "hybrid_llm {" + self + alias + alias + "}", "alias 'a' already defined"},
		{"duplicate group", "hybrid_llm {" + self + self + alias + "}", "group 'self' already defined"},
		{"bad kind", "hybrid_llm {\ngroup self {\nkind triton\nproxy 127.0.0.1:1\n}" + alias + "}", "unknown group kind 'triton'"},
		{"missing kind", "hybrid_llm {\ngroup self {\nproxy 127.0.0.1:1\n}" + alias + "}", "group needs a kind"},
		{"missing proxy", "hybrid_llm {\ngroup self {\nkind vllm\n}" + alias + "}", "group needs a proxy"},
		{"SDK base URL as upstream", "hybrid_llm {" + self + "group cloud {\nkind openai\nproxy https://api.openai.com/v1\n}" + alias + "}",
			"proxy upstream https://api.openai.com/v1: write https://api.openai.com, without /v1"},
		{"upstream with a path prefix", "hybrid_llm {" + self + "group cloud {\nkind openai\nproxy {\nto https://gw.example.com/openai/v1/\n}\n}" + alias + "}",
			"write https://gw.example.com, and add the prefix with rewrite /openai{uri} in the proxy block"},
		{"upstream under another API path", "hybrid_llm {" + self + "group cloud {\nkind openai\nproxy https://generativelanguage.googleapis.com/v1beta/openai/\n}" + alias + "}",
			"write https://generativelanguage.googleapis.com; each request keeps its own path (/v1/chat/completions), so an API under /v1beta/openai needs its path mapped"},
		{"comma-separated upstreams", "hybrid_llm {\ngroup self {\nkind vllm\nproxy 127.0.0.1:8001,127.0.0.1:8003\n}" + alias + "}",
			`proxy upstream "127.0.0.1:8001,127.0.0.1:8003": separate upstreams with spaces, not commas`},
		{"upstream with a trailing slash", "hybrid_llm {" + self + "group cloud {\nkind openai\nproxy http://127.0.0.1:8002/\n}" + alias + "}",
			"write http://127.0.0.1:8002, without the trailing /"},
		{"api_key from an unset variable", "hybrid_llm {" + self + "group cloud {\nkind openai\napi_key\nproxy https://api.openai.com\n}" + alias + "}",
			"api_key needs a value: write api_key {env.CLOUD_API_KEY}"},
		{"bad proxy option", "hybrid_llm {\ngroup self {\nkind vllm\nproxy 127.0.0.1:1 {\nlb_nonsense\n}\n}" + alias + "}", "lb_nonsense"},
		{"bad size", "hybrid_llm {\nmax_body_size lots" + self + alias + "}", "invalid max_body_size 'lots'"},
		{"bad deadline", "hybrid_llm {\ndeadline -3s" + self + alias + "}", "invalid deadline '-3s'"},
		{"bad timeout", "hybrid_llm {" + self + "alias a {\ntarget self m {\ntimeout soon\n}\n}\n}", "invalid timeout 'soon'"},
		{"negative first_byte_timeout", "hybrid_llm {" + self + "alias a {\ntarget self m {\nfirst_byte_timeout -1s\n}\n}\n}", "invalid first_byte_timeout '-1s'"},
		{"idle_timeout twice", "hybrid_llm {" + self + "alias a {\ntarget self m {\nidle_timeout 1s\nidle_timeout 2s\n}\n}\n}", "idle_timeout already specified"},
		{"bad route_headers", "hybrid_llm {\nroute_headers maybe" + self + alias + "}", "route_headers must be 'on' or 'off'"},
		{"unknown target option", "hybrid_llm {" + self + "alias a {\ntarget self m {\npriority 3\n}\n}\n}", "unrecognized target subdirective 'priority'"},
		{"weight outside a set", "hybrid_llm {" + self + "alias a {\ntarget self m {\nweight 3\n}\n}\n}", "weight belongs to a target in a weighted set"},
		{"fallback_on without statuses", "hybrid_llm {" + self + "alias a {\ntarget self m {\nfallback_on\n}\n}\n}", "fallback_on needs at least one status"},
		{"fallback_on 2xx", "hybrid_llm {" + self + "alias a {\ntarget self m {\nfallback_on 429 200\n}\n}\n}", "invalid fallback_on status '200'"},
		{"fallback_on class", "hybrid_llm {" + self + "alias a {\ntarget self m {\nfallback_on 3xx\n}\n}\n}", "invalid fallback_on status '3xx'"},
		{"fallback_on twice", "hybrid_llm {" + self + "alias a {\ntarget self m {\nfallback_on 429\nfallback_on 5xx\n}\n}\n}", "fallback_on already specified"},
		{"bad group stream_usage", "hybrid_llm {\ngroup self {\nkind vllm\nstream_usage yes\nproxy 127.0.0.1:1\n}" + alias + "}", "stream_usage must be 'on' or 'off', got 'yes'"},
		{"affinity below 1", "hybrid_llm {\ngroup self {\nkind vllm\naffinity {\nmax_load 0.5\n}\nproxy 127.0.0.1:1\n}" + alias + "}", "max_load must be a factor of at least 1, got 0.5"},
		{"affinity on a cloud", "hybrid_llm {\ngroup self {\nkind openai\naffinity\nproxy 127.0.0.1:1\n}" + alias + "}", "affinity and classes apply to groups of kind vllm only"},
		{"classes on a cloud", "hybrid_llm {\ngroup self {\nkind openai\nclasses\nproxy 127.0.0.1:1\n}" + alias + "}", "classes apply to groups of kind vllm only"},
		{"class share above 1", "hybrid_llm {\ngroup self {\nkind vllm\nclasses {\nstandard 1.2\n}\nproxy 127.0.0.1:1\n}" + alias + "}", "standard: a share of the red line is at most 1, got 1.2"},
		{"batch above standard", "hybrid_llm {\ngroup self {\nkind vllm\nclasses {\nstandard 0.5\nbatch 0.7\n}\nproxy 127.0.0.1:1\n}" + alias + "}", "batch's share (0.7) is above standard's (0.5)"},
		{"bad queue", "hybrid_llm {\ngroup self {\nkind vllm\nclasses {\nqueue 0\n}\nproxy 127.0.0.1:1\n}" + alias + "}", "queue: the size must be a positive integer"},
		{"bad queue wait", "hybrid_llm {\ngroup self {\nkind vllm\nclasses {\nqueue 8 soon\n}\nproxy 127.0.0.1:1\n}" + alias + "}", "queue: the wait must be a positive duration"},
		{"unknown classes option", "hybrid_llm {\ngroup self {\nkind vllm\nclasses {\nreserve 0.2\n}\nproxy 127.0.0.1:1\n}" + alias + "}", "unrecognized classes option 'reserve'"},
		{"unknown class", "hybrid_llm {" + self + "alias a {\ntarget self m\n}\nclients {\nclient c k {\nclass urgent\n}\n}\n}", "unknown class \"urgent\""},
		{"bad group translate", "hybrid_llm {\ngroup self {\nkind vllm\ntranslate always\nproxy 127.0.0.1:1\n}" + alias + "}", "translate must be 'exact', 'lossy' or 'off', got 'always'"},
		{"group stream_usage twice", "hybrid_llm {\ngroup self {\nkind vllm\nstream_usage on\nstream_usage off\nproxy 127.0.0.1:1\n}" + alias + "}", "stream_usage already specified"},
		{"health outside a set", "hybrid_llm {" + self + "alias a {\ntarget self m {\nhealth {\nerror_rate 5%\n}\n}\n}\n}", "health belongs to a target in a weighted set"},
		{"bad error_rate", "hybrid_llm {" + self + "alias a {\nweighted {\nhealth {\nerror_rate 150%\n}\ntarget self m\n}\n}\n}", "invalid error_rate '150%'"},
		{"unknown strategy", "hybrid_llm {" + self + "alias a {\nweighted {\nstrategy fastest\ntarget self m\n}\n}\n}", "unknown strategy 'fastest'"},
		{"strategy twice", "hybrid_llm {" + self + "alias a {\nweighted {\nstrategy cost\nstrategy latency\ntarget self m\n}\n}\n}", "strategy already specified"},
		{"color without a tag", "hybrid_llm {" + self + "alias a {\ntarget self m\ncolor\n}\n}", "color needs a tag"},
		{"color without a model", "hybrid_llm {" + self + "alias a {\ntarget self m\ncolor c self\n}\n}", "color needs a group and a model name"},
		{"bad color fallback", "hybrid_llm {" + self + "alias a {\ntarget self m\ncolor c self m {\nfallback maybe\n}\n}\n}", "fallback must be 'on' or 'off'"},
		{"weight on a color", "hybrid_llm {" + self + "alias a {\ntarget self m\ncolor c self m {\nweight 3\n}\n}\n}", "weight belongs to a target in a weighted set"},
		{"mirror ratio over 100%", "hybrid_llm {" + self + "alias a {\ntarget self m\nmirror self n {\nratio 150%\n}\n}\n}", "invalid ratio '150%'"},
		{"unknown mirror option", "hybrid_llm {" + self + "alias a {\ntarget self m\nmirror self n {\nratio 5%\nweight 2\n}\n}\n}", "weight belongs to a target in a weighted set"},
		{"tier without a model", "hybrid_llm {" + self + "alias a {\ntarget self m\ntier self\n}\n}", "tier needs a group and a model name"},
		{"tier formats empty", "hybrid_llm {" + self + "alias a {\ntarget self m\ntier self n {\nformats\n}\n}\n}", "formats needs at least one"},
		{"unknown degrade option", "hybrid_llm {" + self + "alias a {\ntarget self m\ndegrade {\nfloor 3\n}\n}\n}", "unrecognized degrade option 'floor'"},
		{"bad degrade cap", "hybrid_llm {" + self + "alias a {\ntarget self m\ndegrade {\ncap lots\n}\n}\n}", "invalid cap 'lots'"},
		{"degrade twice", "hybrid_llm {" + self + "alias a {\ntarget self m\ndegrade\ndegrade\n}\n}", "degrade already specified"},
		{"unknown health option", "hybrid_llm {" + self + "alias a {\nweighted {\nhealth {\nlatency 1s\n}\ntarget self m\n}\n}\n}", "unrecognized health option 'latency'"},
		{"set health twice", "hybrid_llm {" + self + "alias a {\nweighted {\nhealth\nhealth\ntarget self m\n}\n}\n}", "health already specified"},
		{"empty set", "hybrid_llm {" + self + "alias a {\ntarget self m\nweighted clouds {\nstrategy cost\n}\n}\n}", "weighted set 'clouds' has no targets"},
		{"set with two names", "hybrid_llm {" + self + "alias a {\nweighted a b {\ntarget self m\n}\n}\n}", "wrong argument count"},
		{"unknown in a set", "hybrid_llm {" + self + "alias a {\nweighted {\ncolor c self m\ntarget self m\n}\n}\n}", "a weighted set holds targets, a strategy and a health block only, got 'color'"},
		{"api_key twice", "hybrid_llm {\ngroup self {\nkind vllm\napi_key a\napi_key b\nproxy 127.0.0.1:1\n}" + alias + "}", "api_key already specified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Gateway
			err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// A target without limits gets the defaults; 0 (Caddyfile `off` or `0`)
// means none; a negative limit is refused.
func TestTargetLimits(t *testing.T) {
	var tg routing.Target
	if err := tg.ProvisionLimits(); err != nil || tg.Run.Timeout != 10*time.Minute || tg.Run.FirstByte != time.Minute || tg.Run.Idle != time.Minute ||
		tg.Run.IdleCause != "the upstream sent nothing for 60s" {
		t.Errorf("defaults: timeout %v first byte %v idle %v (%q) err %v", tg.Run.Timeout, tg.Run.FirstByte, tg.Run.Idle, tg.Run.IdleCause, err)
	}
	d := caddyfile.NewTestDispenser(`hybrid_llm {
		group self {
			kind vllm
			proxy 127.0.0.1:8001
		}
		alias a {
			target self m {
				timeout 0
				first_byte_timeout off
				idle_timeout off
			}
		}
	}`)
	var g Gateway
	if err := g.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	al := g.Aliases["a"].Targets[0]
	if err := al.ProvisionLimits(); err != nil || al.Run.Timeout != 0 || al.Run.FirstByte != 0 || al.Run.Idle != 0 {
		t.Errorf("off: timeout %v first byte %v idle %v err %v", al.Run.Timeout, al.Run.FirstByte, al.Run.Idle, err)
	}
	js, _ := json.Marshal(al)
	if got := string(js); got != `{"group":"self","model":"m","timeout":0,"first_byte_timeout":0,"idle_timeout":0}` {
		t.Errorf("JSON: %s", got)
	}
	neg := caddy.Duration(-time.Second)
	if err := (&routing.Target{AttemptLimits: routing.AttemptLimits{FirstByteTimeout: &neg}}).ProvisionLimits(); err == nil || !strings.Contains(err.Error(), "first_byte_timeout must not be negative") {
		t.Errorf("negative: %v", err)
	}
	short := caddy.Duration(1500 * time.Millisecond)
	if tg := (routing.Target{AttemptLimits: routing.AttemptLimits{IdleTimeout: &short}}); tg.ProvisionLimits() != nil || tg.Run.IdleCause != "the upstream sent nothing for 1.5s" {
		t.Errorf("idle cause %q", tg.Run.IdleCause)
	}
}

func TestUnmarshalResponseOptions(t *testing.T) {
	d := caddyfile.NewTestDispenser(`hybrid_llm {
		pass_headers x-ratelimit-* openai-processing-ms
		pass_headers Server
		response_model upstream
		group self {
			kind vllm
			proxy 127.0.0.1:8001
		}
		alias a {
			response_model alias
			target self m
		}
		alias b {
			target self m
		}
	}`)
	var g Gateway
	if err := g.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if strings.Join(g.PassHeaders, ",") != "x-ratelimit-*,openai-processing-ms,Server" {
		t.Errorf("pass_headers: %q", g.PassHeaders)
	}
	if g.ResponseModel != "upstream" || g.Aliases["a"].ResponseModel != "alias" || g.Aliases["b"].ResponseModel != "" {
		t.Errorf("response_model: gateway %q, a %q, b %q", g.ResponseModel, g.Aliases["a"].ResponseModel, g.Aliases["b"].ResponseModel)
	}

	const group = "\ngroup self {\nkind vllm\nproxy 127.0.0.1:1\n}\n"
	for _, tc := range []struct{ name, input, want string }{
		{"pass_headers without names", "hybrid_llm {\npass_headers" + group + "alias a {\ntarget self m\n}\n}", "pass_headers needs one or more header names"},
		{"pass_headers bad name", "hybrid_llm {\npass_headers x-a:b" + group + "alias a {\ntarget self m\n}\n}", `invalid header name "x-a:b"`},
		{"bad response_model", "hybrid_llm {\nresponse_model upstream-name" + group + "alias a {\ntarget self m\n}\n}", "response_model must be 'alias' or 'upstream', got 'upstream-name'"},
		{"response_model twice", "hybrid_llm {\nresponse_model alias\nresponse_model upstream" + group + "alias a {\ntarget self m\n}\n}", "response_model already specified"},
		{"alias response_model without value", "hybrid_llm {" + group + "alias a {\nresponse_model\ntarget self m\n}\n}", "response_model needs one argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Gateway
			err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A weighted set's health block watches every member; a member's own
// block overrides the values it sets.
func TestUnmarshalHealth(t *testing.T) {
	input := `hybrid_llm {
	group a {
		kind openai
		proxy 127.0.0.1:1
	}
	group b {
		kind openai
		proxy 127.0.0.1:2
	}
	alias m {
		weighted clouds {
			health {
				error_rate 5%
				p99_latency 800ms
				alert_at 0.7
				window 5s
				min_requests 10
				hold 30s
				ramp_step 20%
				ramp_interval 1s
				max_degraded 1
			}
			target a x {
				weight 60
			}
			target b y {
				weight 40
				health {
					error_rate 0.1
				}
			}
		}
	}
}`
	var g Gateway
	if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	ts := g.Aliases["m"].Targets
	five, ten := 0.05, 0.1
	want := routing.HealthConfig{ErrorRate: &five, P99Latency: caddy.Duration(800 * time.Millisecond), AlertAt: 0.7,
		Window: caddy.Duration(5 * time.Second), MinRequests: 10, Hold: caddy.Duration(30 * time.Second), RampStep: 0.2,
		RampInterval: caddy.Duration(time.Second), MaxDegraded: 1}
	if ts[0].Health == nil || !reflect.DeepEqual(*ts[0].Health, want) {
		t.Errorf("a's health %+v, want %+v", ts[0].Health, want)
	}
	// b's own error rate, the set's other values
	want.ErrorRate = &ten
	if ts[1].Health == nil || !reflect.DeepEqual(*ts[1].Health, want) {
		t.Errorf("b's own health %+v, want %+v", ts[1].Health, want)
	}

	off := strings.Replace(input, "error_rate 5%", "error_rate off", 1)
	g = Gateway{}
	if err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(off)); err != nil {
		t.Fatal(err)
	}
	if er := g.Aliases["m"].Targets[0].Health.ErrorRate; er == nil || *er != 0 {
		t.Errorf("error_rate off: %v", er)
	}
}

// registryTestGroups ends a hybrid_llm block with a group and an alias.
const registryTestGroups = `group self {
			kind vllm
			proxy 127.0.0.1:8001
		}
		alias chat-main {
			target self qwen
		}
	}`

func TestUnmarshalRegistry(t *testing.T) {
	g := new(Gateway)
	err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`hybrid_llm {
		registry etcd {
			endpoints http://127.0.0.1:2379,http://127.0.0.1:22379 http://127.0.0.1:32379
			prefix /hybrid-llm/prod
			username gw
			password {env.ETCD_PASSWORD}
			dial_timeout 2s
		}
	` + registryTestGroups))
	if err != nil {
		t.Fatal(err)
	}
	rc := g.Registry
	if rc == nil || len(rc.Endpoints) != 2 || rc.Prefix != "/hybrid-llm/prod" || rc.Username != "gw" ||
		rc.Password != "{env.ETCD_PASSWORD}" || time.Duration(rc.DialTimeout) != 2*time.Second {
		t.Errorf("registry %+v", rc)
	}
	for _, tc := range []struct{ input, want string }{
		{"hybrid_llm {\n registry consul {\n endpoints x\n }\n}", `registry "consul": the registry is etcd`},
		{"hybrid_llm {\n registry etcd {\n prefix /x\n }\n}", "endpoints are required"},
		{"hybrid_llm {\n registry etcd {\n endpoints http://a:1\n prefix x\n }\n}", `registry prefix "x"`},
		{"hybrid_llm {\n registry etcd {\n endpoints http://a:1\n lease 5s\n }\n}", "unrecognized registry option 'lease'"},
		{"hybrid_llm {\n registry etcd {\n endpoints http://a:1\n }\n registry etcd {\n endpoints http://a:1\n }\n}", "registry already specified"},
	} {
		err := new(Gateway).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: %v, want %q with its line", tc.input, err, tc.want)
		}
	}
}

func TestUnmarshalRegistryTLS(t *testing.T) {
	g := new(Gateway)
	err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`hybrid_llm {
		registry etcd {
			endpoints https://10.0.0.9:2379
			tls {
				ca /etc/etcd/ca.pem
				cert /etc/etcd/gw.pem
				key /etc/etcd/gw-key.pem
				server_name etcd.internal
			}
		}
	` + registryTestGroups))
	if err != nil {
		t.Fatal(err)
	}
	if tc := g.Registry.TLS; tc == nil || tc.CA != "/etc/etcd/ca.pem" || tc.Key != "/etc/etcd/gw-key.pem" || tc.ServerName != "etcd.internal" {
		t.Errorf("tls %+v", g.Registry.TLS)
	}
	err = new(Gateway).UnmarshalCaddyfile(caddyfile.NewTestDispenser("hybrid_llm {\n registry etcd {\n endpoints https://a:1\n tls {\n cert /x.pem\n }\n }\n}"))
	if err == nil || !strings.Contains(err.Error(), "cert and key go together") {
		t.Errorf("a cert without its key: %v", err)
	}
}

// A mistyped option in any block of hybrid_llm is named with its file and
// line and the option it was most likely meant to be; a word near none
// gets no guess.
func TestUnknownOptionSuggests(t *testing.T) {
	const group = "hybrid_llm {\ngroup self {\nkind vllm\nproxy 127.0.0.1:8001\n"
	const alias = "alias a {\ntarget self m\n"
	for _, tc := range []struct{ name, input, want string }{
		{"gateway", "hybrid_llm {\naliass a {\n}\n}", "unrecognized hybrid_llm subdirective 'aliass' (did you mean 'alias'?), at Testfile:2"},
		{"group", group + "max_num_seq 64\n}\n}", "unrecognized group subdirective 'max_num_seq' (did you mean 'max_num_seqs'?), at Testfile:5"},
		{"group, a letter swapped", group + "max_nmu_seqs 64\n}\n}", "(did you mean 'max_num_seqs'?), at Testfile:5"},
		{"group, a prefix", group + "model\n}\n}", "unrecognized group subdirective 'model' (did you mean 'model_check'?)"},
		{"endpoint", group + "endpoint 127.0.0.1:8001 {\nwieght 2\n}\n}\n}", "unrecognized endpoint subdirective 'wieght' (did you mean 'weight'?), at Testfile:6"},
		{"probe", group + "probe {\nhealth_intervl 1s\n}\n}\n}", "(did you mean 'health_interval'?), at Testfile:6"},
		{"overflow", group + "overflow {\nwaitng 8 2\n}\n}\n}", "unrecognized overflow signal 'waitng' (did you mean 'waiting'?), at Testfile:6"},
		{"breaker", group + "breaker {\nalowed_fails 3\n}\n}\n}", "(did you mean 'allowed_fails'?), at Testfile:6"},
		{"cost", group + "cost {\ngpu_cost_per_mnth 100\n}\n}\n}", "(did you mean 'gpu_cost_per_month'?), at Testfile:6"},
		{"alias", "hybrid_llm {\nalias a {\ntaget self m\n}\n}", "unrecognized alias subdirective 'taget' (did you mean 'target'?), at Testfile:3"},
		{"target", "hybrid_llm {\n" + alias + "target self n {\ntimout 5s\n}\n}\n}", "unrecognized target subdirective 'timout' (did you mean 'timeout'?), at Testfile:5"},
		{"weighted set", "hybrid_llm {\nalias a {\nweighted {\ntargte self m\n}\n}\n}", "got 'targte' (did you mean 'target'?), at Testfile:4"},
		{"set health", "hybrid_llm {\nalias a {\nweighted {\nhealth {\neror_rate 5%\n}\n}\n}\n}", "(did you mean 'error_rate'?), at Testfile:5"},
		{"mirror", "hybrid_llm {\n" + alias + "mirror self n {\nrato 5%\n}\n}\n}", "unrecognized mirror subdirective 'rato' (did you mean 'ratio'?), at Testfile:5"},
		{"tier", "hybrid_llm {\n" + alias + "tier self n {\nqualty 80%\n}\n}\n}", "(did you mean 'quality'?), at Testfile:5"},
		{"color", "hybrid_llm {\n" + alias + "color c self n {\ntrusted_client ci\n}\n}\n}", "(did you mean 'trusted_clients'?), at Testfile:5"},
		{"route", "hybrid_llm {\n" + alias + "route self {\nmax_tokens_ovr 100\n}\n}\n}", "(did you mean 'max_tokens_over'?), at Testfile:5"},
		{"degrade", "hybrid_llm {\n" + alias + "degrade {\nkv_cach 90%\n}\n}\n}", "(did you mean 'kv_cache'?), at Testfile:5"},
		{"clients", "hybrid_llm {\nclients {\nkeys_fle /k\n}\n}", "unrecognized clients subdirective 'keys_fle' (did you mean 'keys_file'?), at Testfile:3"},
		{"client", "hybrid_llm {\nclients {\nclient a k {\nrmp 60\n}\n}\n}", "unrecognized client subdirective 'rmp' (did you mean 'rpm'?), at Testfile:4"},
		{"cloud_spend", "hybrid_llm {\ncloud_spend {\ndaily_ud 50\n}\n}", "(did you mean 'daily_usd'?), at Testfile:3"},
		{"registry", "hybrid_llm {\nregistry etcd {\nendpoint http://a:1\n}\n}", "unrecognized registry option 'endpoint' (did you mean 'endpoints'?), at Testfile:3"},
		{"registry tls", "hybrid_llm {\nregistry etcd {\nendpoints http://a:1\ntls {\ncrt /c\n}\n}\n}", "(did you mean 'cert'?), at Testfile:5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Gateway).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	err := new(Gateway).UnmarshalCaddyfile(caddyfile.NewTestDispenser(group + "frobnicate 1\n}\n}"))
	if err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "'frobnicate', at Testfile:5") {
		t.Errorf("a word near no option: %v", err)
	}
}

// The selection policy's own block suggests too.
func TestLeastLoadUnknownOptionSuggests(t *testing.T) {
	err := new(LeastLoadSelection).UnmarshalCaddyfile(caddyfile.NewTestDispenser("vllm_least_load {\nmax_queu 4\n}"))
	if err == nil || !strings.Contains(err.Error(), "unrecognized vllm_least_load option 'max_queu' (did you mean 'max_queue'?)") {
		t.Errorf("%v", err)
	}
}
