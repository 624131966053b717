// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// passageFor is the passage of a request with this body.
func passageFor(body string) *Passage {
	q := &Asked{API: protocol.ChatCompletions, Body: []byte(body)}
	q.Top, _ = protocol.Scan(q.Body)
	q.Features = NewFeatures(q.Body, nil, &q.Top)
	return &Passage{Bounds: TokenBounds{Asked: q}}
}

// A drained group, and a cloud that answered 429 with a Retry-After,
// take nothing until they are back; the hold ends by itself.
func TestOutGate(t *testing.T) {
	clk := fakeClock(t)
	g := outGate{clock: clk}
	p := passageFor(`{"model":"chat","messages":[]}`)
	cloud := &Target{Model: "m", Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Shared: upstream.NewGroupState()}}
	if why := g.Admit(p, cloud); why != "" {
		t.Fatalf("an open cloud: %q", why)
	}
	cloud.Upstream.Shared.Breaker.HoldFor(30*time.Second, clk.Now())
	if why := g.Admit(p, cloud); why != because.RateLimited {
		t.Errorf("a cloud held by its 429: %q", why)
	}
	clk.Advance(31 * time.Second)
	if why := g.Judge(p, cloud); why != "" {
		t.Errorf("after the hold: %q", why)
	}
	cloud.Upstream.Shared.Drained.Store(true)
	if why := g.Judge(p, cloud); why != because.Drained {
		t.Errorf("a drained group: %q", why)
	}
}

// A target whose window cannot hold the prompt and the answer asked for
// is passed over, as is one no larger than a window a context-length
// error proved too small; an unknown window passes.
func TestWindowGate(t *testing.T) {
	var g windowGate
	small := &Target{ContextWindow: 1000, Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}
	large := &Target{ContextWindow: 8000, Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}
	unknown := &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}
	p := passageFor(`{"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":2000}`)
	for _, tc := range []struct {
		name string
		t    *Target
		want Reason
	}{{"too small", small, because.ContextWindow}, {"large enough", large, ""}, {"unknown", unknown, ""}} {
		if why := g.Admit(p, tc.t); why != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, why, tc.want)
		}
	}
	p.MinWindow = 8000
	if why := g.Judge(p, large); why != because.ContextWindow {
		t.Errorf("a window a context-length error proved too small: %q", why)
	}
}

// A target whose group does not serve the request's API is passed over
// for it (an OpenAI cloud and an Anthropic token count), and not for
// another, nor for an endpoint the gateway forwards without knowing it. A
// Messages request goes translated to a group that serves chat
// completions, unless the group says off, or the request holds what chat
// cannot carry and the group does not allow the loss.
func TestAPIGate(t *testing.T) {
	var g apiGate
	group := func(kind, translate string, apis ...string) *Target {
		return &Target{Upstream: &upstream.Group{Kind: kind, APISettings: upstream.APISettings{APIs: apis, Translate: translate}}}
	}
	cloud, vllm := group(upstream.KindOpenAI, ""), group(upstream.KindVLLM, "")
	chatOnly := group(upstream.KindVLLM, "", "chat/completions")
	const plain, thinking = `{"model":"chat","max_tokens":5,"messages":[]}`, `{"model":"chat","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[]}`
	for _, tc := range []struct {
		api  *protocol.API
		body string
		t    *Target
		want Reason
	}{
		{protocol.Messages, plain, cloud, ""},
		{protocol.Messages, plain, group(upstream.KindOpenAI, upstream.TranslateOff), because.ProtocolUnsupported},
		{protocol.Messages, thinking, cloud, because.ProtocolUnsupported},
		{protocol.Messages, thinking, group(upstream.KindOpenAI, upstream.TranslateLossy), ""},
		{protocol.Messages, `{"model":"chat","max_tokens":5,"top_k":3,"messages":[]}`, cloud, because.ProtocolUnsupported},
		{protocol.Messages, `{"model":"chat","max_tokens":5,"top_k":3,"messages":[]}`, chatOnly, ""},
		{protocol.CountTokens, plain, cloud, because.ProtocolUnsupported},
		{protocol.ChatCompletions, plain, cloud, ""},
		{protocol.Messages, plain, vllm, ""},
		{protocol.Messages, plain, chatOnly, ""},
		{protocol.Messages, plain, group(upstream.KindVLLM, "", "embeddings"), because.ProtocolUnsupported},
		{protocol.Embeddings, plain, chatOnly, because.ProtocolUnsupported},
		{protocol.Other, plain, chatOnly, ""},
	} {
		p := passageFor(tc.body)
		p.Bounds.Asked.API = tc.api
		if why := g.Admit(p, tc.t); why != tc.want {
			t.Errorf("%s of %s on %s %v (translate %q): %q, want %q", tc.api.Endpoint, tc.body, tc.t.Upstream.Kind, tc.t.Upstream.APIs, tc.t.Upstream.Translate, why, tc.want)
		}
	}
}

// Anthropic's system prompt, a top-level field of the Messages API, is
// part of the prompt a window must hold.
func TestWindowGateCountsTheSystemPrompt(t *testing.T) {
	target := &Target{ContextWindow: 1000, Upstream: &upstream.Group{Kind: upstream.KindVLLM}}
	system := strings.Repeat("You are a careful coding agent. ", 200) // 6,400 bytes: 1,600 tokens
	for _, tc := range []struct {
		system string
		want   Reason
	}{{system, because.ContextWindow}, {"Be brief.", ""}} {
		p := passageFor(`{"model":"chat","max_tokens":100,"system":"` + tc.system + `","messages":[{"role":"user","content":"hi"}]}`)
		p.Bounds.Asked.API = protocol.Messages
		if why := (windowGate{}).Judge(p, target); why != tc.want {
			t.Errorf("a system prompt of %d bytes: %q, want %q", len(tc.system), why, tc.want)
		}
	}
}
