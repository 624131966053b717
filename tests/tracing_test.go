// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// testSpans is where the requests' spans go: an in-process exporter, in
// place of the OTLP one Caddy's tracing directive configures.
var (
	testSpans    = tracetest.NewSpanRecorder()
	testProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(testSpans))
)

func init() {
	caddy.RegisterModule(requestSpan{})
	httpcaddyfile.RegisterHandlerDirective("test_request_span", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		return requestSpan{}, nil
	})
	httpcaddyfile.RegisterDirectiveOrder("test_request_span", httpcaddyfile.After, "tracing")
}

// requestSpan does what Caddy's tracing directive does for a request: a
// server span in the request's context, ended when the handlers return.
type requestSpan struct{}

func (requestSpan) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.test_request_span", New: func() caddy.Module { return new(requestSpan) }}
}

func (requestSpan) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ctx, span := testProvider.Tracer("caddy").Start(r.Context(), "handler", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	return next.ServeHTTP(w, r.WithContext(ctx))
}

func (requestSpan) UnmarshalCaddyfile(*caddyfile.Dispenser) error { return nil }

// spanAttrs is a span's attributes by key.
func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// tracedRequest sends a chat request and returns the spans it ended: the
// request's (Caddy's) and its children, in the order they ended.
func tracedRequest(t *testing.T) (*http.Response, sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	before := len(testSpans.Ended())
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	var request sdktrace.ReadOnlySpan
	var children []sdktrace.ReadOnlySpan
	waitFor(t, "the request's span", func() bool {
		for _, s := range testSpans.Ended()[before:] {
			if s.Name() == "handler" {
				request = s
			}
		}
		return request != nil
	})
	for _, s := range testSpans.Ended()[before:] {
		if s.Parent().SpanID() == request.SpanContext().SpanID() {
			children = append(children, s)
		}
	}
	return resp, request, children
}

// A traced request gets a child span per attempt, with the GenAI
// conventions' attributes and the gateway's own: the failed attempt on
// self says why the gateway moved on, the cloud's answer carries the
// tokens; a target passed over is an event on the request's span.
func TestTracesPerAttempt(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.loadSite(defaultGateway, "", "test_request_span")
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	resp, request, attempts := tracedRequest(t)
	if resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("answered by %q", resp.Header.Get("X-Hybrid-Target"))
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2 (self failed, cloud answered)", len(attempts))
	}
	self, cloud := spanAttrs(attempts[0]), spanAttrs(attempts[1])
	for _, a := range []map[attribute.Key]attribute.Value{self, cloud} {
		if a["gen_ai.operation.name"].AsString() != "chat" || a["gen_ai.request.model"].AsString() != "chat-main" {
			t.Errorf("attempt: %v", a)
		}
	}
	if attempts[0].Name() != "chat chat-main" || attempts[0].SpanKind() != trace.SpanKindClient {
		t.Errorf("attempt span %q of kind %v", attempts[0].Name(), attempts[0].SpanKind())
	}
	if self["hybrid_llm.group"].AsString() != "self" || self["gen_ai.provider.name"].AsString() != "vllm" ||
		self["hybrid_llm.endpoint"].AsString() != e.selfSrv.Addr() || self["hybrid_llm.fallback_reason"].AsString() == "" ||
		attempts[0].Status().Code != codes.Error || self["http.response.status_code"].AsInt64() != 503 {
		t.Errorf("the failed attempt on self: %v, status %v", self, attempts[0].Status())
	}
	if cloud["hybrid_llm.group"].AsString() != "cloud" || cloud["gen_ai.provider.name"].AsString() != "openai" ||
		cloud["gen_ai.response.model"].AsString() != cloudModel || cloud["gen_ai.usage.output_tokens"].AsInt64() <= 0 ||
		cloud["gen_ai.usage.input_tokens"].AsInt64() <= 0 || attempts[1].Status().Code == codes.Error {
		t.Errorf("the cloud's answer: %v, status %v", cloud, attempts[1].Status())
	}
	if r := spanAttrs(request); r["hybrid_llm.group"].AsString() != "cloud" || r["gen_ai.usage.output_tokens"].AsInt64() <= 0 ||
		r["gen_ai.request.model"].AsString() != "chat-main" {
		t.Errorf("the request's span: %v", r)
	}

	// self drained: passed over, an event on the request's span
	if status, body := adminPost(t, "/hybrid_llm/drain", "application/json", `{"group":"self"}`); status != 200 {
		t.Fatalf("drain: %d %s", status, body)
	}
	_, request, attempts = tracedRequest(t)
	if len(attempts) != 1 || spanAttrs(attempts[0])["hybrid_llm.group"].AsString() != "cloud" {
		t.Errorf("with self drained: %d attempts", len(attempts))
	}
	skipped := false
	for _, ev := range request.Events() {
		a := map[attribute.Key]string{}
		for _, kv := range ev.Attributes {
			a[kv.Key] = kv.Value.AsString()
		}
		skipped = skipped || (ev.Name == "hybrid_llm.skip" && a["hybrid_llm.group"] == "self" && a["hybrid_llm.reason"] == "drained")
	}
	if !skipped {
		t.Errorf("no skip event for the drained self: %v", request.Events())
	}
	adminPost(t, "/hybrid_llm/undrain", "application/json", `{"group":"self"}`)
}
