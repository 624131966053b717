// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// A group serves its kind's APIs unless it names its own, which must be
// APIs the gateway knows: an unknown one is a typo, not an endpoint any
// group would serve.
func TestGroupAPIs(t *testing.T) {
	vllm, cloud := &Group{Kind: KindVLLM}, &Group{Kind: KindOpenAI}
	if !vllm.Serves("messages") || !vllm.ServesAll() || cloud.Serves("messages") || !cloud.Serves("responses") || cloud.ServesAll() {
		t.Error("a vllm group serves every API by default, an openai one the OpenAI ones")
	}
	if !cloud.Serves("") {
		t.Error("an endpoint the gateway does not know is any group's")
	}
	both := &Group{Kind: KindOpenAI, APISettings: APISettings{APIs: []string{"chat/completions", "messages"}}}
	if err := both.checkAPIs(); err != nil || !both.Serves("messages") || both.Serves("embeddings") {
		t.Errorf("named APIs: %v", err)
	}
	for _, typo := range []string{"v1/messages", "chat/completion", "/messages", "rerank", ""} {
		g := &Group{Kind: KindVLLM, APISettings: APISettings{APIs: []string{"chat/completions", typo}}}
		if err := g.checkAPIs(); err == nil || !strings.Contains(err.Error(), "messages/count_tokens") {
			t.Errorf("apis %q: %v", typo, err)
		}
	}
}

// A Messages request reaches a group translated only when the group
// serves chat completions and not messages, and does not say off; lossy
// is the group's to say.
func TestGroupTranslatesMessages(t *testing.T) {
	for _, tc := range []struct {
		g         *Group
		on, lossy bool
	}{
		{&Group{Kind: KindOpenAI}, true, false},
		{&Group{Kind: KindOpenAI, APISettings: APISettings{Translate: TranslateLossy}}, true, true},
		{&Group{Kind: KindOpenAI, APISettings: APISettings{Translate: TranslateOff}}, false, false},
		{&Group{Kind: KindVLLM}, false, false}, // it serves messages itself
		{&Group{Kind: KindVLLM, APISettings: APISettings{APIs: []string{"chat/completions"}}}, true, false},
		{&Group{Kind: KindVLLM, APISettings: APISettings{APIs: []string{"embeddings"}, Translate: TranslateLossy}}, false, false},
	} {
		if on, lossy := tc.g.TranslatesMessages(); on != tc.on || lossy != tc.lossy {
			t.Errorf("%s %v translate %q: %v %v, want %v %v", tc.g.Kind, tc.g.APIs, tc.g.Translate, on, lossy, tc.on, tc.lossy)
		}
	}
	if err := (&Group{Kind: KindOpenAI, APISettings: APISettings{Translate: "always"}}).checkAPIs(); err == nil || !strings.Contains(err.Error(), "lossy") {
		t.Errorf("translate always: %v", err)
	}
}

// A group is OpenAI's own API by its upstreams' hosts, not by its kind:
// an OpenAI-compatible server of another vendor is not.
func TestGroupOpenAIHosted(t *testing.T) {
	for dial, want := range map[string]bool{"api.openai.com:443": true, "my-east.openai.azure.com:443": true,
		"127.0.0.1:8000": false, "api.together.xyz:443": false, "openai.com.example:443": false} {
		g := &Group{Kind: KindOpenAI}
		g.Run.Proxy = &reverseproxy.Handler{Upstreams: reverseproxy.UpstreamPool{{Dial: dial}}}
		if g.OpenAIHosted() != want {
			t.Errorf("%s: %v", dial, !want)
		}
	}
}

// Anthropic lists dated model ids, and takes the name without the date
// as an alias of the latest: the model check accepts either.
func TestUndatedModelID(t *testing.T) {
	for id, want := range map[string]string{"claude-sonnet-4-5-20250929": "claude-sonnet-4-5", "claude-3-opus-20240229": "claude-3-opus",
		"claude-sonnet-4-5": "claude-sonnet-4-5", "gpt-4o-2024-08-06": "gpt-4o-2024-08-06", "model-1234567a": "model-1234567a"} {
		if got := undated(id); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
}
