// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// A body with the top-level "model" key twice must not let the client pick
// the upstream model (and spend the gateway's cloud key on it): the alias
// lookup and the rewrite see the first key, while the upstream's decoder
// (Go's, Python's) keeps the last. Such a body is refused; a "model" key
// nested deeper is the client's business.
func TestDuplicateModelKeyIsRefused(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{Models: []string{cloudModel, "gpt-4o"}})
	e.load(defaultGateway)

	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, body := range []string{
		`{"model":"cloud-first",` + msgs + `,"model":"gpt-4o"}`,
		`{"mod\u0065l":"cloud-first",` + msgs + `,"model":"gpt-4o"}`,
		`{"model":"cloud-first",` + msgs + `,"mod\u0065l":"gpt-4o"}`,
	} {
		resp, got := post(t, "/v1/chat/completions", body)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("body %s: answered 200; the cloud was asked for %q", body, models(e.cloudPosts()))
			e.cloud.ResetRequests()
			continue
		}
		wantError(t, resp, got, http.StatusBadRequest, "invalid_json")
	}
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
		t.Errorf("upstreams got %d requests", n)
	}

	resp, got := post(t, "/v1/chat/completions", `{"model":"cloud-first",`+msgs+`,"metadata":{"model":"x"}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a nested model key: %d %s", resp.StatusCode, got)
	}
	if m := models(e.cloudPosts()); len(m) != 1 || m[0] != cloudModel {
		t.Errorf("the cloud was asked for %q", m)
	}
}

// Every field the gateway reads is refused when given twice, naming the
// field: the gateway would read the first and the upstream's decoder the
// last. Asking for stream usage and then not (include_usage true, then
// false) would keep the usage chunk from the gateway: a stream never
// counted, on the client's or the cloud's bill.
func TestDuplicateReadFieldsAreRefused(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)

	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ body, param string }{
		{`{"model":"chat-main","stream":true,"stream_options":{"include_usage":true,"include_usage":false},` + msgs + `}`, "stream_options.include_usage"},
		{`{"model":"chat-main","stream_options":{"include_usage":true},"stream":true,` + msgs + `,"stream_options":{"include_usage":false}}`, "stream_options"},
		{`{"model":"chat-main","stream":false,` + msgs + `,"stream":true}`, "stream"},
		{`{"model":"chat-main","max_tokens":4,` + msgs + `,"max_tokens":50000}`, "max_tokens"},
		{`{"model":"chat-main","max_completion_tokens":4,` + msgs + `,"max_completion_tokens":50000}`, "max_completion_tokens"},
		{`{"model":"chat-main","n":1,` + msgs + `,"n":64}`, "n"},
		{`{"model":"chat-main",` + msgs + `,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1000) + `"}]}`, "messages"},
	} {
		resp, got := post(t, "/v1/chat/completions", tc.body)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: answered 200", tc.param)
			continue
		}
		e1 := wantError(t, resp, got, http.StatusBadRequest, "invalid_json")
		if e1.Error.Param == nil || *e1.Error.Param != tc.param || !strings.Contains(e1.Error.Message, tc.param) {
			t.Errorf("%s: param %v, message %q", tc.param, e1.Error.Param, e1.Error.Message)
		}
	}
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
		t.Errorf("upstreams got %d requests", n)
	}

	// the same stream asked for once is served and counted
	resp, got := post(t, "/v1/chat/completions", `{"model":"chat-main","stream":true,"stream_options":{"include_usage":false},`+msgs+`}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a single include_usage: %d %s", resp.StatusCode, got)
	}
	if entry := e.accessLog(resp.Header.Get("X-Request-Id")); entry["llm_completion_tokens"] == nil {
		t.Errorf("the stream was not counted: %v", entry)
	}
}

// A field the gateway reads for limits or streaming, given a value of
// another JSON type than the OpenAI API's, is refused 400 before any
// upstream sees it: vLLM's lax decoder reads " 5000" as 5000 and "yes" as
// true, where the gateway would read no ceiling, no reservation, no
// stream. The values the API defines, and null, are served.
func TestMistypedReadFieldsAreRefused(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway + "clients {\n\tclient strict " + hashed("sk-strict-key") + " {\n\t\tmax_tokens 50 refuse\n\t\tmax_n 1\n\t}\n}\n")
	auth := []string{"Authorization", "Bearer sk-strict-key"}

	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ fields, param string }{
		{`"max_tokens":" 5000"`, "max_tokens"},
		{`"max_tokens":"5000 "`, "max_tokens"},
		{`"max_tokens":"\t5000"`, "max_tokens"},
		{`"max_tokens":"5000\n"`, "max_tokens"},
		{`"max_tokens":5000.0`, "max_tokens"},
		{`"max_completion_tokens":"5000"`, "max_completion_tokens"},
		{`"n":" 3"`, "n"},
		{`"n":3.0`, "n"},
		{`"stream":"yes"`, "stream"},
		{`"stream":"on"`, "stream"},
		{`"stream":"y"`, "stream"},
		{`"stream":1`, "stream"},
		{`"stream":true,"stream_options":{"include_usage":"yes"}`, "stream_options.include_usage"},
		{`"stream":true,"stream_options":{"continuous_usage_stats":"on"}`, "stream_options.continuous_usage_stats"},
		{`"stream":true,"stream_options":"include_usage"`, "stream_options"},
	} {
		resp, got := post(t, "/v1/chat/completions", `{"model":"chat-main",`+tc.fields+`,`+msgs+`}`, auth...)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: answered 200", tc.fields)
			continue
		}
		e1 := wantError(t, resp, got, http.StatusBadRequest, "invalid_type")
		if e1.Error.Param == nil || *e1.Error.Param != tc.param || !strings.Contains(e1.Error.Message, tc.param) {
			t.Errorf("%s: param %v, message %q", tc.fields, e1.Error.Param, e1.Error.Message)
		}
	}
	if resp, got := post(t, "/v1/responses", `{"model":"chat-main","input":"hi","max_output_tokens":"5000"}`, auth...); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(string(got), `"max_output_tokens"`) {
		t.Errorf("a string max_output_tokens: %d %s", resp.StatusCode, got)
	}
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
		t.Errorf("upstreams got %d requests", n)
	}

	// the types the API defines, and null for absent, are served
	for _, fields := range []string{`"max_tokens":20,"n":1,"stream":false`, `"max_tokens":null,"n":null,"stream":null,"stream_options":null`,
		`"max_tokens":20,"stream":true,"stream_options":{"include_usage":true}`} {
		if resp, got := post(t, "/v1/chat/completions", `{"model":"chat-main",`+fields+`,`+msgs+`}`, auth...); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", fields, resp.StatusCode, got)
		}
	}
}

// A client's own X-Idempotency-Key, the header Go's transport resends a
// request by, is replaced by the gateway's request id: the client does
// not choose what is resent.
func TestClientIdempotencyKeyIsReplaced(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	resp, body := post(t, "/v1/chat/completions", chatBody, "X-Idempotency-Key", "client-chosen")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	p := e.selfPosts()
	if len(p) != 1 {
		t.Fatalf("%d upstream requests", len(p))
	}
	if got := p[0].Header.Values("X-Idempotency-Key"); len(got) != 1 || got[0] != resp.Header.Get("X-Request-Id") {
		t.Errorf("the upstream got X-Idempotency-Key %q, want the request id %s", got, resp.Header.Get("X-Request-Id"))
	}
}

// A response aborted after its first byte still leaves its routing record
// in the access log: that is the request an operator looks up.
func TestAbortedResponseKeepsItsRouteRecord(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	e.cloud.SetFailures(simulator.Failures{CutAfterChunks: 1})

	req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "aborted-1")
	if resp, err := client.Do(req); err == nil {
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Error("the cut body was read without an error")
		}
		resp.Body.Close()
	}

	entry := e.accessLog("aborted-1")
	want := map[string]any{
		"llm_group":           "cloud",
		"llm_attempts":        float64(2),
		"llm_fallback":        true,
		"llm_fallback_reason": "http_503",
	}
	for k, v := range want {
		if entry[k] != v {
			t.Errorf("%s = %v, want %v", k, entry[k], v)
		}
	}
	if tried, _ := entry["llm_tried"].([]any); len(tried) != 1 || tried[0] != "self:http_503" {
		t.Errorf("llm_tried = %v", entry["llm_tried"])
	}
	if ttfb, _ := entry["llm_ttfb"].(float64); ttfb <= 0 {
		t.Errorf("llm_ttfb = %v", entry["llm_ttfb"])
	}
}

// An upstream can die in the middle of an event. The error event must
// still be an event of its own, not glued onto the partial one, or an SSE
// client never sees it.
func TestStreamCutInsideAnEventEndsWithErrorEvent(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	var tail atomic.Value // what the upstream writes after a whole event, before it dies
	cutting, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n"+tail.Load().(string))
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cutting.Close()
	e.load(withPlainSelf(defaultGateway, cutting.URL()))

	for _, cut := range []string{`data: {"n":`, `data: {"n":2}` + "\n", ""} {
		tail.Store(cut)
		resp, body := post(t, "/v1/chat/completions", streamBody)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		// events end with a blank line (the SSE spec); the last one must
		// be the error, whole
		events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
		last := events[len(events)-1]
		if !strings.HasPrefix(last, `data: {"error":{`) || !strings.HasSuffix(last, `"code":"stream_interrupted"}}`) ||
			strings.Count(last, "data: ") != 1 {
			t.Errorf("upstream cut after %q: the stream ends with %q", cut, last)
		}
	}
}

// Trailers an upstream sends after its body reach the client.
func TestTrailersReachTheClient(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	withTrailer, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Usage")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"chat.completion","choices":[]}`)
		w.Header().Set("X-Usage", "42")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer withTrailer.Close()
	e.load(withPlainSelf(defaultGateway, withTrailer.URL()))

	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := resp.Trailer.Get("X-Usage"); got != "42" {
		t.Errorf("trailer X-Usage %q, want 42 (trailers %v)", got, resp.Trailer)
	}
}

// A config reload does not cut what is in flight: a stream that started
// before it finishes whole, and a request still waiting for its first
// byte falls back on the old config's targets.
func TestReloadKeepsInFlightRequests(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	release := make(chan struct{})
	arrived := make(chan string, 2)
	gated, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		stream := strings.Contains(string(b), `"stream":true`)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"n":"first"}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		arrived <- r.Header.Get("X-Request-Id")
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		if !stream {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `data: {"n":"second","choices":[{"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer gated.Close()
	block := withPlainSelf(defaultGateway, gated.URL())
	e.load(block)

	type result struct {
		resp *http.Response
		body string
		err  error
	}
	send := func(body string, out chan<- result) {
		req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(bufio.NewReader(resp.Body))
		out <- result{resp, string(b), err}
	}
	streamed, waiting := make(chan result, 1), make(chan result, 1)
	go send(streamBody, streamed)
	go send(chatBody, waiting)
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the requests did not reach the upstream")
		}
	}

	e.load("route_headers off\n" + block) // a changed config: a real reload
	close(release)

	s := <-streamed
	if s.err != nil || s.resp.StatusCode != http.StatusOK || !strings.HasSuffix(s.body, `data: {"n":"second","choices":[{"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n") {
		t.Errorf("stream across the reload: %v %q", s.err, s.body)
	}
	w := <-waiting
	if w.err != nil || w.resp.StatusCode != http.StatusOK || w.resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:http_503" {
		t.Errorf("request across the reload: %v %q", w.err, w.body)
	}
}

// A client's Expect: 100-continue (curl sends it for large bodies), an
// upstream's 103 Early Hints and a chunked request body all pass: the
// informational response is not passed on (it arrives on the transport's
// goroutine), and the upstream gets the whole rewritten body.
func TestExpectContinueEarlyHintsAndChunkedBody(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	got := make(chan string, 2)
	hinting, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		w.Header().Del("Link")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"chat.completion","choices":[]}`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer hinting.Close()
	e.load(withPlainSelf(defaultGateway, hinting.URL()))

	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(chatBody)
		if chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Link") != "" || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Errorf("chunked %v: %d %v %s", chunked, resp.StatusCode, resp.Header, b)
		}
	}
	want := strings.Replace(chatBody, `"model":"chat-main"`, `"model":"`+selfModel+`"`, 1)
	close(got)
	n := 0
	for b := range got {
		if n++; b != want {
			t.Errorf("upstream received %s, want %s", b, want)
		}
	}
	if n != 2 {
		t.Errorf("upstream received %d requests", n)
	}
}

// With flush_interval set, Caddy's proxy flushes from a timer goroutine
// while it copies the body: the attempt's writer must stand that (run
// with -race).
func TestFlushIntervalTimer(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	const size = 20 * 100
	slow, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(size))
		for range size / 100 {
			fmt.Fprint(w, strings.Repeat("x", 100))
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond) // pacing the upstream, not synchronisation
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	e.load(withPlainSelf(defaultGateway, slow.URL()+" {\n\t\tflush_interval 1ms\n\t}"))

	for range 3 {
		resp, body := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusOK || len(body) != size {
			t.Fatalf("%d, %d bytes", resp.StatusCode, len(body))
		}
	}
}
