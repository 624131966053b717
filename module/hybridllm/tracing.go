// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Traces: when Caddy's tracing directive traces a request, each attempt
// on a target is a child span of the request's, named and described with
// OpenTelemetry's GenAI conventions (gen_ai.*) plus the gateway's own
// attributes (hybrid_llm.*), and targets passed over are events on the
// request's span. A request that is not traced pays one check of its
// span.

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/hybridllm/caddy-hybrid-llm"

// providerName is gen_ai.provider.name for a group: "openai" for an
// OpenAI-compatible API, "vllm" for self-hosted vLLM.
func providerName(grp *Group) string {
	if grp.Kind == KindVLLM {
		return "vllm"
	}
	return "openai"
}

// traced is the request's span when it is being recorded, else nil. It is
// looked up once: a lookup walks the whole context chain when there is
// no span.
func (rt *route) traced() trace.Span {
	if !rt.spanRead {
		if s := trace.SpanFromContext(rt.r.Context()); s.IsRecording() {
			rt.span = s
		}
		rt.spanRead = true
	}
	return rt.span
}

// startAttemptSpan starts the span of an attempt on t, when the request
// is traced.
func (rt *route) startAttemptSpan(ctx context.Context, t *Target) (context.Context, trace.Span) {
	parent := rt.traced()
	if parent == nil {
		return ctx, nil
	}
	op := rt.api.Operation
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, op+" "+rt.alias.name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("gen_ai.request.model", rt.alias.name),
			attribute.String("gen_ai.provider.name", providerName(t.group)),
			attribute.String("hybrid_llm.group", t.Group),
			attribute.String("hybrid_llm.target_model", t.Model),
			attribute.Int("hybrid_llm.attempt", len(rt.attempts)+1),
			attribute.Bool("hybrid_llm.stream", rt.stream),
		))
}

// failedSince returns the attempt recorded last when there are more
// than n: the failure of an attempt that began with n recorded.
func (rt *route) failedSince(n int) *attempt {
	if len(rt.attempts) > n {
		return &rt.attempts[len(rt.attempts)-1]
	}
	return nil
}

// endAttemptSpan records how the attempt ended: the endpoint and its red
// line, the upstream's status, the answer's model and tokens, or why the
// gateway moved on.
func (rt *route) endAttemptSpan(span trace.Span, t *Target, res *attemptResult, status int, failed *attempt) {
	if span == nil {
		return
	}
	if ep := res.ep; ep != nil {
		span.SetAttributes(attribute.String("hybrid_llm.endpoint", ep.dial))
		if vg := t.group.vllm; vg != nil {
			if rl := vg.redLine(ep); rl != 0 {
				span.SetAttributes(attribute.Int64("hybrid_llm.red_line", rl))
			}
		}
	}
	if status > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	switch {
	case failed != nil:
		span.SetAttributes(attribute.String("hybrid_llm.fallback_reason", string(failed.reason)))
		span.SetStatus(codes.Error, string(failed.reason))
	case res.done:
		span.SetAttributes(attribute.String("gen_ai.response.model", t.Model))
		if rt.usage.Found {
			span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", rt.usage.Prompt),
				attribute.Int64("gen_ai.usage.output_tokens", rt.usage.Completion))
		}
		if status >= 400 {
			span.SetStatus(codes.Error, "upstream answered "+strconv.Itoa(status))
		}
	}
	span.End()
}

// traceSkip records a target passed over on the request's span.
func (rt *route) traceSkip(t *Target, why reason) {
	if s := rt.traced(); s != nil {
		s.AddEvent("hybrid_llm.skip", trace.WithAttributes(
			attribute.String("hybrid_llm.group", t.Group),
			attribute.String("hybrid_llm.reason", string(why))))
	}
}

// traceOutcome sets the request's span's attributes once it is answered.
func (rt *route) traceOutcome() {
	s := rt.traced()
	if s == nil || rt.alias == nil {
		return
	}
	s.SetAttributes(attribute.String("gen_ai.operation.name", rt.api.Operation),
		attribute.String("gen_ai.request.model", rt.alias.name),
		attribute.String("hybrid_llm.outcome", string(rt.outcome)))
	if t := rt.answered; t != nil {
		s.SetAttributes(attribute.String("hybrid_llm.group", t.Group),
			attribute.String("gen_ai.provider.name", providerName(t.group)),
			attribute.String("gen_ai.response.model", t.Model))
	}
	if rt.usage.Found {
		s.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", rt.usage.Prompt),
			attribute.Int64("gen_ai.usage.output_tokens", rt.usage.Completion))
		if rt.estimated {
			s.SetAttributes(attribute.Bool("hybrid_llm.usage_estimated", true))
		}
	}
	if o := rt.overflowed(rt.answered); o != "" {
		s.SetAttributes(attribute.String("hybrid_llm.overflow", o))
	}
	if rt.interruption != "" {
		s.SetAttributes(attribute.String("hybrid_llm.interrupt_cause", rt.interruption))
	}
	if rt.priced {
		s.SetAttributes(attribute.Float64("hybrid_llm.cost_usd", rt.costUSD))
	}
}
