// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// What a request is charged when its answer brought no usage: a stream
// the client cut before its usage chunk, one the upstream broke off, an
// upstream that sends none. The client was served the prompt and what
// was passed on of the answer, so that is what it is charged, estimated
// and marked as such (llm_usage_estimated in the access log,
// usage_estimated_total in the metrics):
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
//     at most what max_tokens allowed. Embeddings have no completion.

// estimateUsage sets the request's tokens to the gateway's estimate when
// it was answered (2xx) and the answer carried no usage, or when the
// client left before the answer, with the request at an upstream.
func (rt *route) estimateUsage() {
	if rt.answered == nil && rt.abandoned != nil {
		rt.estimateAbandoned()
		return
	}
	if rt.usage.Found || rt.answered == nil || rt.status >= 300 || rt.status < 200 {
		return
	}
	u := &rt.usage
	u.Prompt, u.Completion, u.Cached = rt.promptEstimate(), 0, 0
	switch {
	case rt.api.PromptOnly:
	case u.SSE:
		u.Completion = u.TextEvents
		if u.TextBytes > 8*u.TextEvents {
			u.Completion = (u.TextBytes + 3) / 4
		}
	case u.Size > 0 && !u.Full:
		u.Completion = (u.TextBytes + 3) / 4
	default:
		u.Completion = (rt.sent + 3) / 4
		if m := rt.features.requested(); m > 0 {
			u.Completion = min(u.Completion, int64(m)*int64(rt.features.choices()))
		}
	}
	u.Found, rt.estimated = true, true
	usageEstimated.WithLabelValues(rt.g.Name, rt.alias.name, rt.answered.Group).Inc()
}

// estimateAbandoned charges a request whose client left before the
// answer while an upstream had it: the upstream read its prompt, and a
// cloud generates a JSON answer whole, and bills it, whether or not
// anyone is left to read it (vLLM aborts a request whose connection
// closes, and a stream stops with its connection).
func (rt *route) estimateAbandoned() {
	t := rt.abandoned
	u := &rt.usage
	*u = protocol.UsageScanner{Prompt: rt.promptEstimate(), Found: true}
	if !rt.stream && t.group.vllm == nil && !rt.api.PromptOnly {
		_, u.Completion = rt.tokenBoundOn(t)
	}
	rt.estimated = true
	usageEstimated.WithLabelValues(rt.g.Name, rt.alias.name, t.Group).Inc()
}

// charged is the target a request is charged to: the one that answered,
// or the one the client left (see estimateAbandoned).
func (rt *route) charged() (*Target, time.Time) {
	if rt.answered != nil {
		return rt.answered, rt.answerBegan
	}
	if rt.estimated {
		return rt.abandoned, rt.abandonedAt
	}
	return nil, time.Time{}
}

// promptEstimate is the request's prompt in tokens, as estimated: the
// bytes of the fields it is made of, divided by 4, or of its text (with
// mediaPartTokens for each image, audio clip or file) if that is more.
func (rt *route) promptEstimate() int64 {
	return int64(max(rt.features.promptWithMedia(), (rt.top.PromptBytes+3)/4))
}
