// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Traces: when Caddy's tracing directive traces a request, each attempt
// on a target is a child span of the request's, named and described with
// OpenTelemetry's GenAI conventions (gen_ai.*) plus the gateway's own
// attributes (hybrid_llm.*), and targets passed over are events on the
// request's span. A request that is not traced pays one check of its
// span.

// traceSkip records a target passed over on the request's span.
func traceSkip(x *exchange, t *routing.Target, why routing.Reason) {
	if s := x.traced(); s != nil {
		s.AddEvent("hybrid_llm.skip", trace.WithAttributes(
			attribute.String("hybrid_llm.group", t.Group),
			attribute.String("hybrid_llm.reason", string(why))))
	}
}

// traceOutcome sets the request's span's attributes once it is answered.
func traceOutcome(x *exchange) {
	s := x.traced()
	if s == nil || x.alias == nil {
		return
	}
	s.SetAttributes(attribute.String("gen_ai.operation.name", x.q.API.Operation),
		attribute.String("gen_ai.request.model", x.alias.Name),
		attribute.String("hybrid_llm.outcome", string(x.ans.outcome)))
	if t := x.ans.target; t != nil {
		s.SetAttributes(attribute.String("hybrid_llm.group", t.Group),
			attribute.String("gen_ai.provider.name", routing.ProviderName(t.Upstream)),
			attribute.String("gen_ai.response.model", t.Model))
	}
	if x.usage.Found {
		s.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", x.usage.Prompt),
			attribute.Int64("gen_ai.usage.output_tokens", x.usage.Completion))
		if x.usage.Cached > 0 {
			s.SetAttributes(attribute.Int64("gen_ai.usage.cache_read.input_tokens", x.usage.Cached))
		}
		if x.usage.CacheWrite > 0 {
			s.SetAttributes(attribute.Int64("gen_ai.usage.cache_creation.input_tokens", x.usage.CacheWrite))
		}
		if x.usage.Reasoning > 0 {
			s.SetAttributes(attribute.Int64("gen_ai.usage.reasoning.output_tokens", x.usage.Reasoning))
		}
		if x.ans.estimated {
			s.SetAttributes(attribute.Bool("hybrid_llm.usage_estimated", true))
		}
	}
	if o := x.ans.overflow; o != "" {
		s.SetAttributes(attribute.String("hybrid_llm.overflow", o))
	}
	if x.ans.interruption != "" {
		s.SetAttributes(attribute.String("hybrid_llm.interrupt_cause", x.ans.interruption))
	}
	if x.ans.priced {
		s.SetAttributes(attribute.Float64("hybrid_llm.cost_usd", x.ans.costUSD))
	}
}
