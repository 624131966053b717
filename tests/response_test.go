// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// upstreamOnlyHeaders are what a cloud behind a CDN sends about itself.
var upstreamOnlyHeaders = map[string]string{
	"Server":                        "cloudflare",
	"Openai-Organization":           "acme-prod-1234",
	"Openai-Project":                "proj_secret",
	"Openai-Processing-Ms":          "412",
	"Openai-Version":                "2020-10-01",
	"X-Ratelimit-Remaining-Tokens":  "149990",
	"X-Ratelimit-Limit-Requests":    "10000",
	"Set-Cookie":                    "__cf_bm=abc; path=/; domain=.api.cloud.example; HttpOnly",
	"Cf-Ray":                        "8f1e2d3c4b5a-AMS",
	"Cf-Cache-Status":               "DYNAMIC",
	"Via":                           "1.1 google",
	"Alt-Svc":                       `h3=":443"; ma=86400`,
	"Strict-Transport-Security":     "max-age=31536000; includeSubDomains",
	"X-Envoy-Upstream-Service-Time": "398",
}

// cloudStandIn answers every chat request the way a cloud behind a CDN
// does: its own headers, a dated model name, a Content-Length; streams
// framed with blank lines.
func cloudStandIn(t *testing.T) *simulator.Server {
	t.Helper()
	srv, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range upstreamOnlyHeaders {
			w.Header().Set(k, v)
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Custom-Kept", "yes")
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for i, c := range []string{`{"role":"assistant","content":""}`, `{"content":"Hello"}`, `{"content":" there"}`} {
				_, _ = w.Write([]byte(`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":` + c + `,"finish_reason":null}]}` + "\n\n"))
				if i == 0 {
					w.(http.Flusher).Flush()
				}
			}
			_, _ = w.Write([]byte(`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\ndata: [DONE]\n\n"))
			return
		}
		body := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write([]byte(body))
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// The client does not learn from the headers where its request landed:
// none of the cloud's own headers reach it unless the operator passes
// them, and the ordinary ones always do.
func TestUpstreamHeadersHeldBack(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	cloud := cloudStandIn(t)
	block := withPlainSelf(defaultGateway, cloud.URL())
	check := func(t *testing.T, passed ...string) {
		t.Helper()
		for _, body := range []string{chatBody, streamBody} {
			resp, got := post(t, "/v1/chat/completions", body)
			if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" {
				t.Fatalf("%d %s", resp.StatusCode, got)
			}
			for k, v := range upstreamOnlyHeaders {
				want := ""
				for _, p := range passed {
					if p == k {
						want = v
					}
				}
				if k == "Server" && want == "" {
					want = "Caddy" // the gateway's own
				}
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Custom-Kept") != "yes" ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), map[bool]string{false: "application/json", true: "text/event-stream"}[body == streamBody]) {
				t.Errorf("ordinary headers lost: %v", resp.Header)
			}
		}
	}

	e.load(block)
	check(t)

	e.load("pass_headers x-ratelimit-* OPENAI-PROCESSING-MS\n" + block)
	check(t, "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Limit-Requests", "Openai-Processing-Ms")
}

// By default answers name the alias the client sent, in a JSON answer
// and in every chunk of a stream, and no header names the served model;
// response_model upstream keeps the upstream's name, says it in
// X-Hybrid-Model too, and an alias can choose for itself.
func TestResponseModel(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	cloud := cloudStandIn(t)
	block := withPlainSelf(defaultGateway, cloud.URL())
	models := func(t *testing.T, body string) (answer string, chunks []string) {
		t.Helper()
		resp, got := post(t, "/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, got)
		}
		if !strings.Contains(body, `"stream":true`) {
			var out struct {
				Model   string `json:"model"`
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(got, &out); err != nil || len(out.Choices) != 1 || out.Choices[0].Message.Content == "" {
				t.Fatalf("answer %s (%v)", got, err)
			}
			return out.Model, nil
		}
		for _, ev := range sseEvents([]byte(strings.ReplaceAll(string(got), "\r\n", "\n"))) {
			if ev == "[DONE]" {
				continue
			}
			var c struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatalf("chunk %q: %v", ev, err)
			}
			chunks = append(chunks, c.Model)
		}
		if len(chunks) < 3 {
			t.Fatalf("%d chunks: %s", len(chunks), got)
		}
		return "", chunks
	}
	streamed := strings.Replace(streamBody, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
	expect := func(t *testing.T, alias, want, header string) {
		t.Helper()
		if got, _ := models(t, strings.Replace(chatBody, "chat-main", alias, 1)); got != want {
			t.Errorf("%s: answer's model %q, want %q", alias, got, want)
		}
		if resp, _ := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", alias, 1)); resp.Header.Get("X-Hybrid-Model") != header {
			t.Errorf("%s: X-Hybrid-Model %q, want %q", alias, resp.Header.Get("X-Hybrid-Model"), header)
		}
		for _, body := range []string{streamBody, streamed} {
			_, chunks := models(t, strings.Replace(body, "chat-main", alias, 1))
			for i, got := range chunks {
				if got != want {
					t.Errorf("%s: chunk %d's model %q, want %q", alias, i, got, want)
				}
			}
		}
	}

	e.load(block)
	expect(t, "chat-main", "chat-main", "")

	upstream := strings.Replace(block, "alias cloud-first {", "alias cloud-first {\n\tresponse_model alias", 1)
	e.load("response_model upstream\n" + upstream)
	expect(t, "chat-main", "gpt-4o-mini-2024-07-18", "qwen2.5-7b-instruct")
	// cloud-first goes to the cloud simulator, which echoes the name it got
	expect(t, "cloud-first", "cloud-first", "")
}

// The official OpenAI Go SDK reads the alias as the answer's model,
// streamed or not.
func TestOpenAISDKSeesAlias(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: time.Millisecond}, simulator.CloudConfig{})
	e.load(defaultGateway)
	var last *http.Response
	sdk := sdkClient("client-key", &last)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams()
	resp, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "chat-main" || last.Header.Get("X-Hybrid-Target") != "self" || resp.Usage.CompletionTokens != 6 {
		t.Errorf("model %q from %q, usage %+v", resp.Model, last.Header.Get("X-Hybrid-Target"), resp.Usage)
	}

	stream := sdk.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	n := 0
	for stream.Next() {
		if c := stream.Current(); c.Model != "chat-main" {
			t.Errorf("chunk %d: model %q", n, c.Model)
		}
		acc.AddChunk(stream.Current())
		n++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Model != "chat-main" || len(strings.Fields(acc.Choices[0].Message.Content)) != 6 {
		t.Errorf("accumulated %+v", acc.ChatCompletion)
	}
}
