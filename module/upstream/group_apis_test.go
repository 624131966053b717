// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"strings"
	"testing"
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
