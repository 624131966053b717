// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"
	"strconv"

	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/hybridllm/caddy-hybrid-llm"

// ProviderName is gen_ai.provider.name for a group: "openai" for an
// OpenAI-compatible API, "vllm" for self-hosted vLLM.
func ProviderName(grp *upstream.Group) string {
	switch grp.Kind {
	case upstream.KindVLLM:
		return "vllm"
	case upstream.KindAnthropic:
		return "anthropic"
	}
	return "openai"
}

// spanObserver gives an attempt of a traced request its span: the
// endpoint and its red line, the upstream's status, the answer's model
// and tokens, or why the gateway moved on.
type spanObserver struct{}

func (spanObserver) AttemptBegan(ctx context.Context, a *AttemptRecord) context.Context {
	q := a.Request
	if q.Parent == nil {
		return ctx
	}
	t, op := a.Target, q.API.Operation
	ctx, a.span = q.Parent.TracerProvider().Tracer(tracerName).Start(ctx, op+" "+q.Alias,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("gen_ai.request.model", q.Alias),
			attribute.String("gen_ai.provider.name", ProviderName(t.Upstream)),
			attribute.String("hybrid_llm.group", t.Group),
			attribute.String("hybrid_llm.target_model", t.Model),
			attribute.Int("hybrid_llm.attempt", a.Number),
			attribute.Bool("hybrid_llm.stream", q.Stream),
		))
	return ctx
}

func (spanObserver) AttemptEnded(a *AttemptRecord) {
	span, t, res := a.span, a.Target, &a.Result
	if span == nil {
		return
	}
	if ep := res.Endpoint; ep != nil {
		span.SetAttributes(attribute.String("hybrid_llm.endpoint", ep.Dial))
		if vg := t.Upstream.VLLM; vg != nil {
			if rl := vg.RedLine(ep); rl != 0 {
				span.SetAttributes(attribute.Int64("hybrid_llm.red_line", rl))
			}
		}
	}
	if a.Status > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", a.Status))
	}
	switch {
	case a.Failed != nil:
		span.SetAttributes(attribute.String("hybrid_llm.fallback_reason", string(a.Failed.Reason)))
		span.SetStatus(codes.Error, string(a.Failed.Reason))
	case res.Done:
		span.SetAttributes(attribute.String("gen_ai.response.model", t.Model))
		if u := a.Request.Usage; u.Found {
			span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", u.Prompt),
				attribute.Int64("gen_ai.usage.output_tokens", u.Completion))
		}
		if a.Status >= 400 {
			span.SetStatus(codes.Error, "upstream answered "+strconv.Itoa(a.Status))
		}
	}
	span.End()
}
