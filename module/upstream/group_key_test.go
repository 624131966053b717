// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A group key that others may read is warned of at start: written into
// the config, or sent over plain HTTP beyond loopback and private
// addresses. The warnings never hold the key.
func TestWarnKeyExposure(t *testing.T) {
	for _, tc := range []struct {
		name, key, dial string
		tls             bool
		want            []string // the warnings' messages, by their first words
	}{
		{"from the environment, over TLS", "{env.CLOUD_API_KEY}", "api.openai.com:443", true, nil},
		{"from a file, to loopback", "{file./run/secrets/key}", "127.0.0.1:8002", false, nil},
		{"to localhost", "{env.K}", "localhost:8002", false, nil},
		{"to a private address", "{env.K}", "10.0.0.5:8000", false, nil},
		{"to a container's name", "{env.K}", "vllm:8000", false, nil},
		{"to a Kubernetes service", "{env.K}", "vllm.inference.svc.cluster.local:8000", false, nil},
		{"to a shared address", "{env.K}", "100.72.1.9:8000", false, nil},
		{"to a link-local address", "{env.K}", "[fe80::1]:8000", false, nil},
		{"to a public name over plain HTTP", "{env.K}", "api.openai.com:80", false, []string{"api_key goes to this upstream over plain HTTP"}},
		{"to a public address over plain HTTP", "{env.K}", "203.0.113.7:80", false, []string{"api_key goes to this upstream over plain HTTP"}},
		{"written into the config", "sk-literal-0123", "api.openai.com:443", true, []string{"api_key is written into the config"}},
		{"both", "sk-literal-0123", "api.openai.com:80", false, []string{"api_key is written into the config", "api_key goes to this upstream over plain HTTP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &reverseproxy.HTTPTransport{}
			if tc.tls {
				tr.TLS = &reverseproxy.TLSConfig{}
			}
			grp := &Group{APIKey: tc.key, Run: GroupRun{Proxy: &reverseproxy.Handler{Transport: tr, Upstreams: reverseproxy.UpstreamPool{{Dial: tc.dial}}}}}
			core, logs := observer.New(zapcore.WarnLevel)
			warnKeyExposure(zap.New(core), "cloud", grp.APIKey, grp.Run.Proxy)
			var got []string
			for _, e := range logs.All() {
				got = append(got, e.Message)
				if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), "sk-literal") {
					t.Errorf("a warning holds the key: %v", e)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("warning %d: %q, want %q...", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// A group's key goes into its proxy's header operations as its API reads
// it: OpenAI's as Authorization: Bearer, Anthropic's as x-api-key with
// the anthropic-version; into its active health checks too.
func TestGroupKeyHeaders(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want map[string]string
	}{
		{KindOpenAI, map[string]string{"Authorization": "Bearer sk-up"}},
		{KindAnthropic, map[string]string{"X-Api-Key": "sk-up", "Anthropic-Version": "2023-06-01"}},
	} {
		grp := &Group{Kind: tc.kind, APIKey: "sk-up", ProxyRaw: []byte(`{"upstreams":[{"dial":"127.0.0.1:1"}],"health_checks":{"active":{"uri":"/v1/models"}}}`)}
		raw, err := grp.proxyConfig(caddy.Context{}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for h, v := range tc.want {
			for _, at := range []string{"headers.request.set." + h + ".0", "health_checks.active.headers." + h + ".0"} {
				if got := gjson.GetBytes(raw, at).Str; got != v {
					t.Errorf("%s: %s %q, want %q: %s", tc.kind, at, got, v, raw)
				}
			}
		}
		if tc.kind == KindAnthropic && gjson.GetBytes(raw, "headers.request.set.Authorization").Exists() {
			t.Errorf("anthropic: an Authorization header: %s", raw)
		}
	}
	// an anthropic group's version goes everywhere, with a key or without,
	// whatever headers its checks set themselves
	for _, key := range []string{"", "sk-up"} {
		grp := &Group{Kind: KindAnthropic, APIKey: key, ProxyRaw: []byte(`{"upstreams":[{"dial":"127.0.0.1:1"}],"health_checks":{"active":{"uri":"/v1/models","headers":{"x-api-key":["sk-own"]}}}}`)}
		raw, err := grp.proxyConfig(caddy.Context{}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if gjson.GetBytes(raw, "headers.request.set.Anthropic-Version.0").Str != "2023-06-01" || gjson.GetBytes(raw, "health_checks.active.headers.Anthropic-Version.0").Str != "2023-06-01" ||
			gjson.GetBytes(raw, "health_checks.active.headers.X-Api-Key").Exists() {
			t.Errorf("key %q: %s", key, raw)
		}
	}
}
