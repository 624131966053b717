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

// spanObserver gives an attempt of a traced request its span: the
// endpoint and its red line, the upstream's status, the answer's model
// and tokens, or why the gateway moved on.
type spanObserver struct{}

func (spanObserver) attemptBegan(ctx context.Context, a *attemptRecord) context.Context {
	q := a.req
	if q.parent == nil {
		return ctx
	}
	t, op := a.target, q.api.Operation
	ctx, a.span = q.parent.TracerProvider().Tracer(tracerName).Start(ctx, op+" "+q.alias,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("gen_ai.request.model", q.alias),
			attribute.String("gen_ai.provider.name", providerName(t.group)),
			attribute.String("hybrid_llm.group", t.Group),
			attribute.String("hybrid_llm.target_model", t.Model),
			attribute.Int("hybrid_llm.attempt", a.n),
			attribute.Bool("hybrid_llm.stream", q.stream),
		))
	return ctx
}

func (spanObserver) attemptEnded(a *attemptRecord) {
	span, t, res := a.span, a.target, &a.res
	if span == nil {
		return
	}
	if ep := res.ep; ep != nil {
		span.SetAttributes(attribute.String("hybrid_llm.endpoint", ep.Dial))
		if vg := t.group.VLLM; vg != nil {
			if rl := vg.RedLine(ep); rl != 0 {
				span.SetAttributes(attribute.Int64("hybrid_llm.red_line", rl))
			}
		}
	}
	if a.status > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", a.status))
	}
	switch {
	case a.failed != nil:
		span.SetAttributes(attribute.String("hybrid_llm.fallback_reason", string(a.failed.reason)))
		span.SetStatus(codes.Error, string(a.failed.reason))
	case res.done:
		span.SetAttributes(attribute.String("gen_ai.response.model", t.Model))
		if u := a.req.usage; u.Found {
			span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", u.Prompt),
				attribute.Int64("gen_ai.usage.output_tokens", u.Completion))
		}
		if a.status >= 400 {
			span.SetStatus(codes.Error, "upstream answered "+strconv.Itoa(a.status))
		}
	}
	span.End()
}
