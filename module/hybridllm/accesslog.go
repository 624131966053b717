// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// MarshalLogObject writes the routing record into the access log entry,
// as top-level llm_* fields (the route is added with zap.Inline). It runs
// only when an entry is written: the access log's, after the handler
// returned, so a request costs nothing here when access logs are off (a
// module logging through slog with the request's context in the middle
// of it gets the record so far).
func (rt *route) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", rt.id)
	if rt.clientID != "" {
		enc.AddString("llm_client_request_id", rt.clientID)
	}
	if rt.client != nil {
		enc.AddString("llm_client", rt.client.name)
	}
	if rt.alias == nil {
		return nil // refused before routing
	}
	// every byte of a record is written for every request: the fields
	// whose value is the common one (no stream, one attempt, no fallback,
	// no overflow) are left out
	enc.AddString("llm_alias", rt.alias.name)
	if rt.stream {
		enc.AddBool("llm_stream", true)
	}
	enc.AddString("llm_outcome", rt.outcome)
	if rt.interruption != "" {
		enc.AddString("llm_interrupt_cause", rt.interruption)
	}
	if t := rt.answered; t != nil {
		enc.AddString("llm_group", t.Group)
		enc.AddString("llm_model", t.Model)
		if repl, ok := rt.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
			// the committed attempt was the proxy's last
			if ep, ok := repl.GetString("http.reverse_proxy.upstream.hostport"); ok && ep != "" {
				enc.AddString("llm_endpoint", ep)
			}
		}
	}
	n := len(rt.attempts)
	if rt.ttfb > 0 {
		n++
		enc.AddDuration("llm_ttfb", rt.ttfb)
	}
	if len(rt.attempts) > 0 {
		_ = enc.AddArray("llm_tried", (*triedList)(&rt.attempts)) // a pointer: no allocation
		enc.AddInt("llm_attempts", n)
		if rt.ttfb > 0 {
			enc.AddBool("llm_fallback", true)
		}
		enc.AddString("llm_fallback_reason", string(rt.attempts[len(rt.attempts)-1].reason))
	}
	if o := rt.overflowed(rt.answered); o != "" {
		enc.AddBool("llm_overflow", true)
		enc.AddString("llm_overflow_reason", o)
	}
	if rt.rule != "" {
		enc.AddString("llm_route", rt.rule)
	}
	if rt.color != nil {
		enc.AddString("llm_color", rt.color.Tag)
	}
	if d := rt.deg; d != nil && d.degraded {
		enc.AddBool("llm_degraded", true)
		enc.AddString("llm_degraded_from", d.from)
		enc.AddString("llm_degrade_reason", d.reason)
		for k, v := range d.meta {
			enc.AddFloat64("llm_degrade_"+k, v)
		}
		if d.clampedTo > 0 {
			enc.AddInt("llm_degrade_max_tokens", d.clampedTo)
		}
	}
	if rt.usage.Found {
		enc.AddInt64("llm_prompt_tokens", rt.usage.Prompt)
		enc.AddInt64("llm_completion_tokens", rt.usage.Completion)
		if rt.estimated {
			enc.AddBool("llm_usage_estimated", true)
		}
	}
	if rt.priced {
		enc.AddFloat64("llm_cost_usd", rt.costUSD)
	}
	return nil
}

// clientIDField is the client's own request id, for the gateway's log
// records, or nothing.
func (rt *route) clientIDField() zap.Field {
	if rt.clientID == "" {
		return zap.Skip()
	}
	return zap.String("llm_client_request_id", rt.clientID)
}

// triedList renders the failed attempts as `group:reason` strings.
type triedList []attempt

func (l *triedList) MarshalLogArray(ae zapcore.ArrayEncoder) error {
	for _, a := range *l {
		ae.AppendString(a.target.Group + ":" + string(a.reason))
	}
	return nil
}
