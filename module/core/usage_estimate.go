// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// What a request is charged when its answer brought no usage: a stream
// the client cut before its usage chunk, one the upstream broke off, an
// upstream that sends none. The client was served the prompt and what
// was passed on of the answer, so that is what it is charged, estimated
// and marked as such (llm_usage_estimated in the access log,
// usage_estimated_total in the metrics); the prompt's own counts when the
// answer gave them before it broke off (an Anthropic stream's
// message_start):
//
//   - the prompt: the bytes of the fields the upstream makes it of
//     (messages, prompt, input, instructions, tools, functions), JSON and
//     all, divided by 4: a message's JSON about what a chat template
//     adds to it, a token id about a token; or, if that is more, the
//     bytes of their text divided by 4 and mediaPartTokens for each
//     image, audio clip or file, whose bytes (a URL) tell nothing of
//     what a model bills for it;
//   - the completion: of a stream, the events passed on that carried
//     text (one event is one token in vLLM's and OpenAI's streams), or,
//     when they average more than 8 bytes of text (an upstream that
//     sends several tokens an event), their text's bytes divided by 4;
//     of a JSON
//     answer, its text's bytes divided by 4; of an answer the gateway
//     does not read (compressed, another type), its bytes divided by 4,
//     at most what max_tokens allowed. Embeddings have no completion;
//     a token count (Anthropic's count_tokens) is charged nothing.

// estimateUsage sets the request's tokens to the gateway's estimate (b
// bounds them; gw is the gateway's name, for the metrics) when
// it was answered (2xx) and the answer carried no usage, or when the
// client left before the answer, with the request at an upstream.
func (x *exchange) estimateUsage(b *routing.TokenBounds, gw string) {
	if x.q.API.Free {
		return // a token count: nothing generated, nothing charged
	}
	if x.ans.target == nil && x.ans.abandoned != nil {
		x.estimateAbandoned(b, gw)
		return
	}
	if x.usage.Found || x.ans.target == nil || x.ans.status >= 300 || x.ans.status < 200 {
		return
	}
	u := &x.usage
	if !u.Partial {
		u.Prompt, u.Cached = b.PromptEstimate(), 0
	}
	u.Completion = 0
	switch {
	case x.q.API.PromptOnly:
	case u.SSE:
		u.Completion = u.TextEvents
		if u.TextBytes > 8*u.TextEvents {
			u.Completion = (u.TextBytes + 3) / 4
		}
	case u.Size > 0 && !u.Full:
		u.Completion = (u.TextBytes + 3) / 4
	default:
		u.Completion = (x.ans.sent + 3) / 4
		if m := x.q.Features.Requested(); m > 0 {
			u.Completion = min(u.Completion, int64(m)*int64(x.q.Features.Choices()))
		}
	}
	u.Found, x.ans.estimated = true, true
	routing.UsageEstimated.WithLabelValues(gw, x.alias.Name, x.ans.target.Group).Inc()
}

// estimateAbandoned charges a request whose client left before the
// answer while an upstream had it: the upstream read its prompt, and a
// cloud generates a JSON answer whole, and bills it, whether or not
// anyone is left to read it (vLLM aborts a request whose connection
// closes, and a stream stops with its connection).
func (x *exchange) estimateAbandoned(b *routing.TokenBounds, gw string) {
	t := x.ans.abandoned
	u := &x.usage
	*u = protocol.UsageScanner{Usage: protocol.Usage{Prompt: b.PromptEstimate(), Found: true}}
	if !x.q.Stream && t.Upstream.VLLM == nil && !x.q.API.PromptOnly {
		_, u.Completion = b.TokenBoundOn(t)
	}
	x.ans.estimated = true
	routing.UsageEstimated.WithLabelValues(gw, x.alias.Name, t.Group).Inc()
}
