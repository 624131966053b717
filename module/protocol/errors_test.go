// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// OpenAI's error shape: the four fields always there, an empty param or
// code null; in a stream, a data event of its own.
func TestOpenAIErrors(t *testing.T) {
	got := string(OpenAIErrors.Body(Error{Type: TypeInvalidRequest, Code: "model_not_found", Param: "model", Message: "The model `x` does not exist."}))
	want := `{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = string(OpenAIErrors.Body(Error{Type: TypeServer, Message: "boom"}))
	want = `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	ev := string(OpenAIErrors.StreamEvent(Error{Type: TypeServer, Code: "stream_interrupted", Message: "cut"}))
	if want := `data: {"error":{"message":"cut","type":"server_error","param":null,"code":"stream_interrupted"}}` + "\n\n"; ev != want {
		t.Errorf("stream event %q, want %q", ev, want)
	}
	up := string(OpenAIErrors.Upstream([]byte(`{"error":{"message":"gpt-x is busy","type":"server_error"}}`), 503, "gpt-x", "chat"))
	if strings.Contains(up, "gpt-x") || !strings.Contains(up, "chat is busy") {
		t.Errorf("an upstream's error: %s", up)
	}
}

// Every API answers errors in a shape, and WriteError sends it whole:
// the status, a JSON body of the length it says, not to be sniffed.
func TestWriteError(t *testing.T) {
	for _, a := range append(known[:], Other) {
		if a.Errors == nil {
			t.Fatalf("%q has no error shape", a.Endpoint)
		}
		w := httptest.NewRecorder()
		if err := a.WriteError(w, Error{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded", Message: "slow down"}); err != nil {
			t.Fatal(err)
		}
		h := w.Header()
		if w.Code != http.StatusTooManyRequests || h.Get("Content-Type") != "application/json" ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
			t.Errorf("%q: %d %v", a.Endpoint, w.Code, h)
		}
		want := `"code":"rate_limit_exceeded"`
		if a.Errors == AnthropicErrors {
			want = `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
		}
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("%q: body %s", a.Endpoint, w.Body)
		}
	}
}

// OpenAI's shape, as vLLM, OpenAI, Azure OpenAI and Ollama answer it,
// tells a 404 about the model from any other, and a context-length 400
// from any other.
func TestOpenAIUpstreamErrors(t *testing.T) {
	for body, want := range map[string]bool{
		// vLLM, current shape and the one before 0.10
		`{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`:        true,
		`{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`: true,
		// OpenAI, Azure OpenAI, Ollama
		`{"error":{"message":"The model ` + "`gpt-x`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`: true,
		`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`:                                                                 true,
		`{"error":"model \"llama3\" not found, try pulling it first"}`:                                                                                                             true,
		// a 404 that is not about the model
		`{"detail":"Not Found"}`: false,
		`{"error":{"message":"Invalid URL (POST /v1/chat/completion)","type":"invalid_request_error","param":null,"code":null}}`: false,
		`not json: model does not exist`: false,
		``:                               false,
	} {
		if got := OpenAIErrors.ModelNotFound([]byte(body)); got != want {
			t.Errorf("ModelNotFound(%s) = %v", body, got)
		}
	}
	for body, want := range map[string]bool{
		`{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","param":null,"code":400}}`: true,
		`{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}`:                                           true,
		`{"error":{"message":"max_tokens must be at least 1","type":"invalid_request_error"}}`:                                                                             false,
		`{"error":{"message":"Invalid JSON"}}`: false,
		``:                                     false,
	} {
		if got := OpenAIErrors.ContextLength([]byte(body)); got != want {
			t.Errorf("ContextLength(%s) = %v", body, got)
		}
	}
}
