// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"io"
	"net/http"
	"strings"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/translate"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// converter turns an answer in the API a target speaks into the client's
// as it passes (see package translate).
type converter interface {
	Pass(w io.Writer, p []byte) (int, error)
	Finish(w io.Writer) error
}

// apiFor is the API an attempt on t speaks to its upstream for request
// q: the request's, or chat completions for a Messages request its group
// takes translated.
func apiFor(q *routing.Asked, t *routing.Target) *protocol.API {
	if translated, _ := q.Translated(t.Upstream); translated {
		return protocol.ChatCompletions
	}
	return q.API
}

// translatedRequest makes pr, an attempt's request of q, one of chat
// completions: its path's endpoint, the body translated for target t
// (clamped first for a tier with a max_tokens, which deg records),
// Anthropic's own headers left out. It returns the body's length.
func translatedRequest(q *routing.Asked, deg *routing.DegradeRecord, pr *http.Request, t *routing.Target, cls priority.Class, b *upstreamBody) int64 {
	u := *pr.URL
	u.Path = strings.TrimSuffix(u.Path, q.API.Endpoint) + protocol.ChatCompletions.Endpoint
	u.RawPath = ""
	u.RawQuery = "" // the Messages API's (Claude Code's beta=true), no chat endpoint's
	pr.URL = &u
	h := make(http.Header, len(pr.Header))
	for k, v := range pr.Header {
		if !strings.HasPrefix(k, "Anthropic-") {
			h[k] = v
		}
	}
	pr.Header = h
	body := q.Body
	if t.Tier != nil && deg != nil {
		deg.ClampedTo = 0
		if m := t.Tier.MaxTokens; m > 0 {
			if out, changed, err := protocol.ClampTokens(body, q.API.LengthFields, m, q.API.LengthFields[0]); err == nil && changed {
				body, deg.ClampedTo = out, m
			}
		}
	}
	_, lossy := t.Upstream.TranslatesMessages()
	field := "max_tokens" // what every OpenAI-compatible server knows
	if t.Upstream.OpenAIHosted() {
		field = "max_completion_tokens" // what OpenAI's reasoning models take
	}
	model := t.Run.ModelJSON
	if p := t.Run.ClassModelJSON; p != nil {
		model = p[cls] // the priority field after the name
	}
	out, err := translate.ToChat(body, translate.Options{Model: model, MaxTokensField: field,
		VLLM: t.Upstream.Kind == upstream.KindVLLM, Lossy: lossy, NoStreamUsage: !t.Upstream.Run.StreamUsage})
	if err != nil {
		out = nil // the gate let through only what translates: an empty body fails the attempt
	}
	return b.set(out)
}

// converterFor is what turns a translated attempt's answer into the
// client's: a stream's events, or a whole answer; model is the name the
// client gets, as JSON.
func converterFor(sse bool, model []byte) converter {
	if sse {
		return &translate.Stream{Model: model}
	}
	return &translate.Whole{Model: model}
}
