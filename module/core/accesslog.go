// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"go.uber.org/zap/zapcore"
)

// MarshalLogObject writes the routing record into the access log entry,
// as top-level llm_* fields (the record is added with zap.Inline). It runs
// only when an entry is written: the access log's, after the handler
// returned, so a request costs nothing here when access logs are off (a
// module logging through slog with the request's context in the middle
// of it gets the record so far).
func (x *exchange) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", x.id)
	if x.clientID != "" {
		enc.AddString("llm_client_request_id", x.clientID)
	}
	if x.client != nil {
		enc.AddString("llm_client", x.client.Name)
	}
	if x.alias == nil {
		return nil // refused before routing
	}
	// every byte of a record is written for every request: the fields
	// whose value is the common one (no stream, one attempt, no fallback,
	// no overflow) are left out
	enc.AddString("llm_alias", x.alias.Name)
	if x.q.Stream {
		enc.AddBool("llm_stream", true)
	}
	enc.AddString("llm_outcome", x.ans.outcome)
	if x.ans.interruption != "" {
		enc.AddString("llm_interrupt_cause", x.ans.interruption)
	}
	if t := x.ans.target; t != nil {
		enc.AddString("llm_group", t.Group)
		enc.AddString("llm_model", t.Model)
		// the committed attempt was the proxy's last
		if ep := upstreamHostport(x.r); ep != "" {
			enc.AddString("llm_endpoint", ep)
		}
	}
	if x.ans.via.affine {
		enc.AddBool("llm_affinity", true) // the conversation's endpoint, not the least loaded
	}
	if x.ans.via.translated {
		enc.AddString("llm_translated_to", protocol.ChatCompletions.Endpoint)
	}
	if x.ans.class != priority.Standard {
		enc.AddString("llm_class", x.ans.class.String())
	}
	if x.ans.via.queued {
		enc.AddBool("llm_queued", true) // waited in a group's queue for a slot
	}
	n := len(x.attempts)
	if x.ans.ttfb > 0 {
		n++
		enc.AddDuration("llm_ttfb", x.ans.ttfb)
	}
	if len(x.attempts) > 0 {
		_ = enc.AddArray("llm_tried", (*triedList)(&x.attempts)) // a pointer: no allocation
		enc.AddInt("llm_attempts", n)
		if x.ans.ttfb > 0 {
			enc.AddBool("llm_fallback", true)
		}
		enc.AddString("llm_fallback_reason", string(x.attempts[len(x.attempts)-1].Reason))
	}
	if o := x.ans.overflow; o != "" {
		enc.AddBool("llm_overflow", true)
		enc.AddString("llm_overflow_reason", o)
	}
	if x.rule != "" {
		enc.AddString("llm_route", x.rule)
	}
	if x.color != nil {
		enc.AddString("llm_color", x.color.Tag)
	}
	if d := x.deg; d != nil && d.Degraded {
		enc.AddBool("llm_degraded", true)
		enc.AddString("llm_degraded_from", d.From)
		enc.AddString("llm_degrade_reason", d.Reason)
		for k, v := range d.Meta {
			enc.AddFloat64("llm_degrade_"+k, v)
		}
		if d.ClampedTo > 0 {
			enc.AddInt("llm_degrade_max_tokens", d.ClampedTo)
		}
	}
	if x.usage.Found {
		x.logUsage(enc)
	}
	if x.ans.priced {
		enc.AddFloat64("llm_cost_usd", x.ans.costUSD)
	}
	return nil
}

// logUsage writes the answer's tokens: the prompt and the completion,
// and the classes within them the upstream told.
func (x *exchange) logUsage(enc zapcore.ObjectEncoder) {
	u := &x.usage
	enc.AddInt64("llm_prompt_tokens", u.Prompt)
	enc.AddInt64("llm_completion_tokens", u.Completion)
	for _, c := range [...]struct {
		key string
		n   int64
	}{{"llm_cached_tokens", u.Cached}, {"llm_cache_write_tokens", u.CacheWrite}, {"llm_reasoning_tokens", u.Reasoning}} {
		if c.n > 0 {
			enc.AddInt64(c.key, c.n)
		}
	}
	if x.ans.estimated {
		enc.AddBool("llm_usage_estimated", true)
	}
}

// triedList renders the failed attempts as `group:reason` strings.
type triedList []routing.Attempt

func (l *triedList) MarshalLogArray(ae zapcore.ArrayEncoder) error {
	for _, a := range *l {
		ae.AppendString(a.Target.Group + ":" + string(a.Reason))
	}
	return nil
}

// LogFields returns the access log's extra fields of the request, if any:
// none where the server writes no access log (Caddy's Add costs an
// allocation on every call).
func LogFields(r *http.Request) *caddyhttp.ExtraLogFields {
	ctx := r.Context()
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.Logs == nil {
		return nil
	}
	extra, _ := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields)
	return extra
}

// upstreamHostport is the upstream the proxy picked for the request's
// latest attempt, "" before any.
func upstreamHostport(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	ep, _ := repl.GetString("http.reverse_proxy.upstream.hostport")
	return ep
}
