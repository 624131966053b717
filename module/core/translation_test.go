// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// askMessages sends a Messages request through the core as the Anthropic
// SDK does, with its anthropic-version (and a beta).
func askMessages(t *testing.T, f *Front, body string) *httptest.ResponseRecorder {
	t.Helper()
	return askAt(t, f, "/v1/messages", body, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "prompt-caching-2024-07-31")
}

// chatAnswer answers as a chat-only upstream does: a JSON completion
// with its usage, and a 404 off its chat endpoint.
func chatAnswer(w http.ResponseWriter, r *http.Request) error {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		w.WriteHeader(http.StatusNotFound)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	_, err := io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-a","choices":[{"index":0,"message":{"role":"assistant","content":"Bonjour"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":8}}}`)
	return err
}

// chatStream streams as a chat-only upstream does, with \r\n framing; cut
// leaves out its finish and end.
func chatStream(cut bool) upstreamFunc {
	return func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		events := []string{`{"id":"c1","model":"gpt-a","choices":[{"index":0,"delta":{"role":"assistant","content":"Bon"}}]}`,
			`{"id":"c1","model":"gpt-a","choices":[{"index":0,"delta":{"content":"jour"}}]}`}
		if !cut {
			events = append(events, `{"id":"c1","model":"gpt-a","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"c1","model":"gpt-a","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2}}`, `[DONE]`)
		}
		for _, ev := range events {
			_, _ = io.WriteString(w, "data: "+ev+"\r\n\r\n")
			w.(http.Flusher).Flush()
		}
		if cut {
			panic(http.ErrAbortHandler)
		}
		return nil
	}
}

// A Messages request to a group that serves only chat completions goes
// translated: to its chat endpoint, as a chat request with the target's
// model, its length as max_tokens (every OpenAI-compatible server's;
// max_completion_tokens to OpenAI's own API) and without Anthropic's
// headers; the answer comes back a message
// with the alias as its model, its cached tokens apart, with its length.
func TestCoreMessagesTranslated(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, map[string]upstreamFunc{"a": chatAnswer})
	w := askMessages(t, g, `{"model":"chat-main","max_tokens":64,"system":"Answer in French.","messages":[{"role":"user","content":"Hello"}]}`)
	body := w.Body.String()
	if w.Code != http.StatusOK || gjson.Get(body, "type").String() != "message" || gjson.Get(body, "model").String() != "chat-main" ||
		gjson.Get(body, "content.0.text").String() != "Bonjour" || gjson.Get(body, "stop_reason").String() != "end_turn" {
		t.Fatalf("%d %s", w.Code, body)
	}
	if u := gjson.Get(body, "usage"); u.Get("input_tokens").Int() != 4 || u.Get("cache_read_input_tokens").Int() != 8 || u.Get("output_tokens").Int() != 2 {
		t.Errorf("usage %s", u.Raw)
	}
	if w.Header().Get("X-Hybrid-Translated") != "chat/completions" || w.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("headers %v", w.Header())
	}
	if len(rec.calls) != 1 || rec.paths[0] != "/v1/chat/completions" || rec.headers[0].Get("Anthropic-Version") != "" || rec.headers[0].Get("Anthropic-Beta") != "" {
		t.Fatalf("sent %v to %v with %v", rec.calls, rec.paths, rec.headers)
	}
	sent := rec.bodies[0]
	if gjson.Get(sent, "model").String() != "gpt-a" || gjson.Get(sent, "messages.0.role").String() != "system" ||
		gjson.Get(sent, "max_tokens").Int() != 64 || gjson.Get(sent, "max_completion_tokens").Exists() {
		t.Errorf("the chat request: %s", sent)
	}
}

// A translated stream: chat chunks framed with \r\n come back as the
// Messages API's events, whole at message_stop; one cut before its
// finish ends with an error event in Anthropic's shape, never a
// message_stop.
func TestCoreMessagesTranslatedStream(t *testing.T) {
	for _, cut := range []bool{false, true} {
		g := coreFront(t, new(seen), map[string]upstreamFunc{"a": chatStream(cut)})
		w := askMessages(t, g, `{"model":"chat-main","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hello"}]}`)
		body := w.Body.String()
		if w.Code != http.StatusOK || !strings.HasPrefix(body, "event: message_start\ndata: ") || !strings.Contains(body, `"model":"chat-main"`) ||
			!strings.Contains(body, `"text":"Bon"`) || strings.Contains(body, "gpt-a") {
			t.Fatalf("cut %v: %d %q", cut, w.Code, body)
		}
		if whole := strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"); whole == cut {
			t.Errorf("cut %v: %q", cut, body)
		}
		if !cut && !strings.Contains(body, `"usage":{"input_tokens":12,"cache_read_input_tokens":0,"output_tokens":2}`) {
			t.Errorf("usage: %q", body)
		}
		if errored := strings.Contains(body, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\""); errored != cut {
			t.Errorf("cut %v: %q", cut, body)
		}
	}
}

// What chat cannot carry keeps a Messages request from a target that
// would translate it: the next target that serves the API natively gets
// it; with none, the client is told what could not be carried, a 400: the
// request's to change.
func TestCoreMessagesUntranslatable(t *testing.T) {
	const thinking = `{"model":"chat-main","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Hello"}]}`
	native := func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"gpt-b","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		return err
	}
	rec := new(seen)
	g := coreFrontOf(t, rec, map[string]upstreamFunc{"b": native}, map[string]string{"b": `["messages"]`})
	w := askMessages(t, g, thinking)
	if w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "b:gpt-b" || w.Header().Get("X-Hybrid-Fallback-Reason") != "a:protocol_unsupported" ||
		w.Header().Get("X-Hybrid-Translated") != "" {
		t.Fatalf("%d after %v: %s %v", w.Code, rec.calls, w.Body, w.Header())
	}
	rec = new(seen)
	g = coreFront(t, rec, nil)
	w = askMessages(t, g, thinking)
	if msg := gjson.Get(w.Body.String(), "error.message").String(); w.Code != http.StatusBadRequest || gjson.Get(w.Body.String(), "error.type").String() != "invalid_request_error" ||
		len(rec.calls) != 0 || !strings.Contains(msg, "cannot carry the request's thinking") {
		t.Errorf("%d after %v: %s", w.Code, rec.calls, w.Body)
	}
	// allowed, the loss is taken: thinking is left out
	rec = new(seen)
	g = coreFrontOf(t, rec, map[string]upstreamFunc{"a": chatAnswer}, map[string]string{"a": `["chat/completions"],"translate":"lossy"`})
	if w := askMessages(t, g, thinking); w.Code != http.StatusOK || len(rec.bodies) != 1 || strings.Contains(rec.bodies[0], "thinking") {
		t.Errorf("lossy: %d %s, sent %v", w.Code, w.Body, rec.bodies)
	}
}

// An error from a translated attempt reaches the client in Anthropic's
// shape, and a chat target's context-length error hands the request on.
func TestCoreMessagesTranslatedErrors(t *testing.T) {
	g := coreFront(t, new(seen), map[string]upstreamFunc{"a": fail(http.StatusBadRequest, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":null}}`)})
	w := askMessages(t, g, `{"model":"chat-main","max_tokens":8,"temperature":7,"messages":[{"role":"user","content":"hi"}]}`)
	if b := w.Body.String(); w.Code != http.StatusBadRequest || gjson.Get(b, "type").String() != "error" || gjson.Get(b, "error.type").String() != "invalid_request_error" ||
		!strings.Contains(gjson.Get(b, "error.message").String(), "temperature") {
		t.Errorf("%d %s", w.Code, b)
	}
	rec := new(seen)
	g = coreFront(t, rec, map[string]upstreamFunc{
		"a": fail(http.StatusBadRequest, `{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","param":null,"code":400}`),
		"b": chatAnswer,
	})
	w = askMessages(t, g, `{"model":"chat-main","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK || strings.Join(rec.calls, " ") != "a:gpt-a b:gpt-b" || w.Header().Get("X-Hybrid-Fallback-Reason") != "a:context_length" {
		t.Errorf("%d after %v: %s %v", w.Code, rec.calls, w.Body, w.Header())
	}
}

// A Messages request without max_tokens or messages is refused as the API
// refuses it, before any target.
func TestCoreMessagesRequiredFields(t *testing.T) {
	rec := new(seen)
	g := coreFront(t, rec, nil)
	for _, body := range []string{`{"model":"chat-main","messages":[{"role":"user","content":"hi"}]}`, `{"model":"chat-main","max_tokens":5}`} {
		w := askMessages(t, g, body)
		if w.Code != http.StatusBadRequest || gjson.Get(w.Body.String(), "error.type").String() != "invalid_request_error" || len(rec.calls) != 0 {
			t.Errorf("%s: %d %s", body, w.Code, w.Body)
		}
	}
}
