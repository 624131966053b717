// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The quickstart as shipped (examples/Caddyfile), used by the official
// OpenAI Go SDK and by a raw client that accepts gzip and br, against a
// self-hosted vLLM and a cloud that compresses and frames its streams
// with "\r\n": the answers are right, and every token and cent is
// counted, whichever side answered.
// quickstartKey is the client key the tests give the quickstart.
const quickstartKey = "sk-e2e-client-0123456789abcdef"

// loadQuickstart runs examples/Caddyfile, edited by edit, with its
// environment pointed at the env's simulators and two clients.
func loadQuickstart(t *testing.T, e *env, edit func(cfg string) string) {
	t.Helper()
	for k, v := range map[string]string{
		"HYBRID_PORT": "9080", "HYBRID_BIND": "127.0.0.1", "HYBRID_ADMIN": "localhost:2999",
		"SELF_UPSTREAMS": e.selfSrv.Addr(), "SELF_MODEL": selfModel,
		"CLOUD_UPSTREAM": e.cloudSrv.URL(), "CLOUD_MODEL": cloudModel, "CLOUD_API_KEY": cloudKey,
		"HYBRID_CLIENT_KEYS": "e2e=" + quickstartKey + " other=sk-other-client", "HYBRID_CLIENT_KEYS_FILE": "",
	} {
		t.Setenv(k, v)
	}
	cfg, err := os.ReadFile("../examples/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(withTestStorage(edit(string(cfg))), "caddyfile")
	client.CloseIdleConnections()
	waitProbed(t)
}

func TestQuickstartEndToEnd(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{Compress: true, SSELineEnding: "\r\n"})
	loadQuickstart(t, e, func(cfg string) string { return cfg })

	const gw = "default" // the quickstart's gateway has no name
	tokens := func(group string) float64 {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": group, "kind": "completion"})
	}
	cost := func() float64 {
		return metricValue(t, "caddy_hybrid_llm_cloud_cost_usd_total", map[string]string{"gateway": gw, "group": "cloud"})
	}
	var last *http.Response
	sdk := sdkClient(quickstartKey, &last)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := chatParams()
	sdkStream := func(side string) {
		t.Helper()
		stream := sdk.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%s: %v", side, err)
		}
		if len(acc.Choices) != 1 || len(strings.Fields(acc.Choices[0].Message.Content)) != 6 ||
			acc.Choices[0].FinishReason != "length" || last.Header.Get("X-Hybrid-Target") != side {
			t.Errorf("%s: stream %+v from %q", side, acc.ChatCompletion, last.Header.Get("X-Hybrid-Target"))
		}
	}
	// the quickstart requires a client key
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
	// rawGzip posts as curl --compressed does, and reads the answer
	rawGzip := func(side, body string) string {
		t.Helper()
		resp, raw := post(t, "/v1/chat/completions", body, "Accept-Encoding", "gzip, br", "Api-Key", quickstartKey)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != side {
			t.Fatalf("%s: %d %s", side, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"))
		}
		if resp.Header.Get("Content-Encoding") != "gzip" {
			return string(raw)
		}
		zr, err := gzip.NewReader(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(plain)
	}

	// self-hosted answers
	self0 := tokens("self")
	resp, err := sdk.Chat.Completions.New(ctx, params)
	if err != nil || resp.Model != "chat-main" || last.Header.Get("X-Hybrid-Target") != "self" || resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens != 6 {
		t.Fatalf("self: %v %+v", err, resp)
	}
	// priced, the gateway sends an answer out before it journals its
	// charge: whole, with its length, not chunked
	if last.ContentLength <= 0 || len(last.TransferEncoding) > 0 {
		t.Errorf("self: the answer went out with Content-Length %d, Transfer-Encoding %v", last.ContentLength, last.TransferEncoding)
	}
	sdkStream("self")
	if body := rawGzip("self", chatBody); !strings.Contains(body, `"chat.completion"`) {
		t.Errorf("self raw: %q", body)
	}
	// metered once the answer has left, after the client may have read it
	waitFor(t, "self's 16 completion tokens counted", func() bool { return tokens("self")-self0 == 6+6+4 })

	// the self-hosted side is down: the cloud answers
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	cloud0, cost0 := tokens("cloud"), cost()
	resp, err = sdk.Chat.Completions.New(ctx, params)
	if err != nil || resp.Model != "chat-main" || last.Header.Get("X-Hybrid-Target") != "cloud" || resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens != 6 {
		t.Fatalf("cloud: %v %+v", err, resp)
	}
	sdkStream("cloud")
	if body := rawGzip("cloud", chatBody); !strings.Contains(body, `"chat.completion"`) {
		t.Errorf("cloud raw: %q", body)
	}
	events := rawGzip("cloud", streamBody)
	if !strings.HasSuffix(events, "data: [DONE]\r\n\r\n") || strings.Contains(events, `"usage"`) || strings.Count(events, `"content":"`) != 6 {
		t.Errorf("cloud raw stream: %q", events)
	}
	waitFor(t, "cloud's 21 completion tokens counted", func() bool { return tokens("cloud")-cloud0 == 6+6+4+5 })
	waitFor(t, "the cloud's cost counted", func() bool { return cost() > cost0 })
	// the cloud compressed: the gateway's transport asked it to
	reqs := e.cloudPosts()
	if ae := reqs[len(reqs)-1].Header.Get("Accept-Encoding"); ae != "gzip" {
		t.Errorf("the cloud was sent Accept-Encoding %q", ae)
	}
}

// The quickstart answers whatever Host the client names, as the README's
// `curl localhost:8080` does: the address it listens on is a bind, not a
// host matcher that would leave other names an empty 200 from Caddy.
func TestQuickstartAnswersEveryHost(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	loadQuickstart(t, e, func(cfg string) string { return cfg })

	for _, host := range []string{"localhost:9080", "127.0.0.1:9080", "gateway.internal"} {
		req, err := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if resp, body := do(t, req); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"invalid_api_key"`) {
			t.Errorf("%s, no key: %d %q", host, resp.StatusCode, body)
		}
		req, _ = http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+quickstartKey)
		if resp, body := do(t, req); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"model":"chat-main"`) {
			t.Errorf("%s: %d %q", host, resp.StatusCode, body)
		}
	}
}

// The quickstart's access log keeps no client key, in whichever header
// the client sent it: Caddy redacts Authorization, the quickstart's
// filter leaves out Api-Key and X-Api-Key.
func TestQuickstartLogKeepsNoClientKey(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	loadQuickstart(t, e, func(cfg string) string {
		// the record to a file instead of stderr, the rest as shipped
		withFile := strings.Replace(cfg, "\tlog {\n", "\tlog {\n\t\toutput file "+e.logPath+"\n", 1)
		if withFile == cfg {
			t.Fatal("the quickstart's log block changed shape")
		}
		return withFile
	})

	for _, h := range []string{"Authorization", "Api-Key", "X-Api-Key"} {
		v := quickstartKey
		if h == "Authorization" {
			v = "Bearer " + v
		}
		id := "quickstart-key-" + h
		if resp, body := post(t, "/v1/chat/completions", chatBody, h, v, "X-Request-Id", id); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", h, resp.StatusCode, body)
		}
		if entry := e.accessLog(id); entry["llm_alias"] != "chat-main" {
			t.Errorf("%s: the record lost its fields: %v", h, entry)
		}
	}
	b, err := os.ReadFile(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), quickstartKey) {
		t.Error("the access log holds a client key")
	}
	if !strings.Contains(string(b), `"llm_client":"e2e"`) {
		t.Error("the access log does not name the client")
	}
}
