// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The Anthropic Messages API through the gateway, with the official
// Anthropic Go SDK as the client (its key in x-api-key, as Claude Code
// sends it) and vLLM's own /v1/messages as the upstream.

const messagesKey = "sk-claude-code-0123456789"

// messagesGateway is defaultGateway with a client whose key the SDK
// sends (see loadMessages).
const messagesGateway = defaultGateway + "clients {\n\tkeys {env.HYBRID_TEST_MESSAGES_KEYS}\n}\n"

// loadMessages loads block, a messagesGateway, with its client's key.
func loadMessages(t *testing.T, e *env, block string) {
	t.Helper()
	t.Setenv("HYBRID_TEST_MESSAGES_KEYS", "coder="+messagesKey)
	e.load(block)
}

// messagesEnv starts the test's upstreams (self as cfg says) and a
// messagesGateway in front of them; the context ends with the test.
func messagesEnv(t *testing.T, cfg simulator.VLLMConfig) (*env, context.Context) {
	t.Helper()
	e := newEnv(t, cfg, simulator.CloudConfig{})
	loadMessages(t, e, messagesGateway)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return e, ctx
}

// anthropicClient is the SDK pointed at the gateway, without retries.
func anthropicClient(key string, last **http.Response) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(gateway+"/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithResponseInto(last),
	)
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 6,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
}

// A Messages request, whole and streamed, goes to vLLM's /v1/messages as
// it came but for the model's name, swapped both ways (the stream's
// message_start names the alias too); the tokens counted are the
// upstream's.
func TestMessagesNativeThroughTheAnthropicSDK(t *testing.T) {
	e, ctx := messagesEnv(t, simulator.VLLMConfig{})
	gw := e.gatewayName()
	tokens := func(kind string) float64 {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "self", "kind": kind})
	}
	var last *http.Response
	sdk := anthropicClient(messagesKey, &last)

	msg, err := sdk.Messages.New(ctx, messageParams("chat-main"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Model != "chat-main" || len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.StopReason != anthropic.StopReasonMaxTokens ||
		msg.Usage.OutputTokens != 6 || last.Header.Get("X-Hybrid-Target") != "self" {
		t.Fatalf("message %+v from %q", msg, last.Header.Get("X-Hybrid-Target"))
	}
	reqs := e.self.Requests()
	up := reqs[len(reqs)-1]
	if up.Path != "/v1/messages" || gjson.GetBytes(up.Body, "model").String() != selfModel ||
		gjson.GetBytes(up.Body, "system.0.text").String() != "Be brief." || up.Header.Get("Anthropic-Version") == "" ||
		up.Header.Get("X-Api-Key") != "" || strings.Contains(string(up.Body), messagesKey) {
		t.Errorf("upstream got %s %v %s", up.Path, up.Header, up.Body)
	}
	waitFor(t, "the answer metered", func() bool { return tokens("completion") == 6 })
	if p := tokens("prompt"); p != float64(msg.Usage.InputTokens) {
		t.Errorf("prompt tokens metered %v, the upstream said %d", p, msg.Usage.InputTokens)
	}

	stream := sdk.Messages.NewStreaming(ctx, messageParams("chat-main"))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Model != "chat-main" || len(acc.Content) != 1 || len(strings.Fields(acc.Content[0].Text)) != 6 ||
		acc.StopReason != anthropic.StopReasonMaxTokens || acc.Usage.OutputTokens != 6 {
		t.Errorf("stream %+v", acc)
	}
	waitFor(t, "the stream metered", func() bool { return tokens("completion") == 12 })
}

// Errors on /v1/messages come in Anthropic's shape, which the SDK reads:
// an unknown alias, a missing key, and an upstream's own error.
func TestMessagesErrorsInAnthropicShape(t *testing.T) {
	e, ctx := messagesEnv(t, simulator.VLLMConfig{})
	var last *http.Response
	for _, tc := range []struct {
		name, key, model string
		status           int
		typ              anthropic.ErrorType
	}{
		{"an unknown alias", messagesKey, "nope", http.StatusNotFound, anthropic.ErrorTypeNotFoundError},
		{"no key", "sk-not-a-client", "chat-main", http.StatusUnauthorized, anthropic.ErrorTypeAuthenticationError},
	} {
		c := anthropicClient(tc.key, &last)
		_, err := c.Messages.New(ctx, messageParams(tc.model))
		var apierr *anthropic.Error
		if !errors.As(err, &apierr) || apierr.StatusCode != tc.status || apierr.Type() != tc.typ {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// an upstream's 400, from the only target that serves the API, is the
	// answer, in the API's shape (vLLM's own type is BadRequestError)
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusBadRequest})
	c := anthropicClient(messagesKey, &last)
	_, err := c.Messages.New(ctx, messageParams("chat-main"))
	var apierr *anthropic.Error
	if !errors.As(err, &apierr) || apierr.StatusCode != http.StatusBadRequest || apierr.Type() != anthropic.ErrorTypeInvalidRequestError {
		t.Errorf("an upstream's 400: %v", err)
	}
}

// A stream its upstream cuts after its first events ends with an error
// event in Anthropic's shape, which the SDK gives as the stream's error;
// the tokens passed on are charged.
func TestMessagesStreamCutEndsWithAnErrorEvent(t *testing.T) {
	e, ctx := messagesEnv(t, simulator.VLLMConfig{})
	e.self.SetFailures(simulator.Failures{CutAfterChunks: 4})
	var last *http.Response
	c := anthropicClient(messagesKey, &last)
	stream := c.Messages.NewStreaming(ctx, messageParams("chat-main"))
	events := 0
	for stream.Next() {
		events++
	}
	var apierr *anthropic.Error
	if err := stream.Err(); !errors.As(err, &apierr) || apierr.Type() != anthropic.ErrorTypeAPIError || events != 4 {
		t.Fatalf("after %d events: %v", events, err)
	}
	entry := e.accessLog(last.Header.Get("X-Request-Id"))
	if entry["llm_outcome"] != "interrupted" || entry["llm_completion_tokens"] != float64(2) {
		t.Errorf("access log: %v", entry)
	}
}

// A target whose group does not speak the Messages API (an OpenAI
// cloud) and does not translate it is passed over for it with its
// reason, never sent a body it cannot read; with no target left the
// client is told why. A token count no target serves is a 404, on which
// Claude Code counts by itself.
func TestMessagesPassOverTargetsThatDoNotSpeakIt(t *testing.T) {
	e, ctx := messagesEnv(t, simulator.VLLMConfig{})
	untranslated := strings.Replace(messagesGateway, "\tkind openai\n", "\tkind openai\n\ttranslate off\n", 1)
	loadMessages(t, e, untranslated)
	var last *http.Response
	sdk := anthropicClient(messagesKey, &last)
	if n, err := sdk.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "chat-main",
		Messages: messageParams("chat-main").Messages}); err != nil || n.InputTokens <= 0 {
		t.Fatalf("count_tokens at self: %v %v", n, err)
	}
	_, err := sdk.Messages.New(ctx, messageParams("cloud-first"))
	if err != nil || last.Header.Get("X-Hybrid-Target") != "self" || last.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:protocol_unsupported" {
		t.Fatalf("cloud-first: %v, answered by %q after %q", err, last.Header.Get("X-Hybrid-Target"), last.Header.Get("X-Hybrid-Fallback-Reason"))
	}
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	_, err = sdk.Messages.New(ctx, messageParams("chat-main"))
	var apierr *anthropic.Error
	if !errors.As(err, &apierr) || apierr.StatusCode != http.StatusBadGateway ||
		!strings.Contains(apierr.RawJSON(), "cloud (protocol_unsupported)") {
		t.Errorf("self down: %v", err)
	}
	for _, p := range e.cloudPosts() {
		if strings.HasSuffix(p.Path, "/messages") || strings.HasSuffix(p.Path, "/count_tokens") {
			t.Errorf("the cloud got %s", p.Path)
		}
	}
	loadMessages(t, e, untranslated+"alias cloud-only {\n\ttarget cloud "+cloudModel+"\n}\n")
	_, err = sdk.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "cloud-only",
		Messages: messageParams("cloud-only").Messages})
	if !errors.As(err, &apierr) || apierr.StatusCode != http.StatusNotFound || apierr.Type() != anthropic.ErrorTypeNotFoundError {
		t.Errorf("count_tokens no target serves: %v", err)
	}
}

// Raw clients on /v1/messages as on the chat path: one asking for gzip
// and br gets its stream from an upstream that frames it with "\r\n",
// whole, its events as they came but for the alias, its tokens counted;
// one that cancels after a few events is charged what it was passed,
// the prompt as the upstream counted it.
func TestMessagesRawClients(t *testing.T) {
	e, _ := messagesEnv(t, simulator.VLLMConfig{SSELineEnding: "\r\n", OutputTokens: 40, ITL: 5 * time.Millisecond})
	body := `{"model":"chat-main","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	resp, raw := post(t, "/v1/messages", body, "Accept-Encoding", "gzip, br", "X-Api-Key", messagesKey, "Anthropic-Version", "2023-06-01")
	events := strings.Split(strings.TrimSuffix(string(raw), "\r\n\r\n"), "\r\n\r\n")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" || len(events) != 45 ||
		!strings.HasPrefix(events[0], "event: message_start\r\ndata: ") || gjson.Get(events[0][strings.Index(events[0], "{"):], "message.model").String() != "chat-main" ||
		events[len(events)-1] != "event: message_stop\r\n"+`data: {"type":"message_stop"}` || strings.Contains(string(raw), selfModel) {
		t.Fatalf("%d %v, %d events:\n%q", resp.StatusCode, resp.Header, len(events), raw)
	}
	rec := e.accessLog(resp.Header.Get("X-Request-Id"))
	if rec["llm_outcome"] != "ok" || rec["llm_completion_tokens"] != float64(40) || rec["llm_usage_estimated"] != nil {
		t.Errorf("the whole stream's record: %v", rec)
	}

	// a client that leaves after 5 deltas
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", messagesKey)
	cut, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(cut.Body)
	for deltas := 0; deltas < 5 && sc.Scan(); {
		if strings.Contains(sc.Text(), `"text_delta"`) {
			deltas++
		}
	}
	cancel()
	cut.Body.Close()
	id := cut.Header.Get("X-Request-Id")
	waitFor(t, "the cut stream's record", func() bool { return e.accessLog(id) != nil })
	rec = e.accessLog(id)
	prompt := rec["llm_prompt_tokens"]
	if rec["llm_outcome"] != "client_canceled" || rec["llm_usage_estimated"] != true || prompt != float64(3) ||
		rec["llm_completion_tokens"].(float64) < 5 || rec["llm_completion_tokens"].(float64) >= 40 {
		t.Errorf("the cut stream's record: %v", rec)
	}
}

// Mirrors copy a Messages request only to groups that serve the API
// (a vLLM, not an OpenAI cloud), with the API's headers (its version,
// which Anthropic's API requires); a token count is never copied.
func TestMessagesMirrors(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	next, nextSrv := startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"qwen-next"}})
	mirrors := "alias chat-main {\n\tmirror cloud " + cloudModel + " {\n\t\tratio 100%\n\t}\n\tmirror next qwen-next {\n\t\tratio 100%\n\t}\n"
	loadMessages(t, e, strings.Replace(messagesGateway, "alias chat-main {\n", mirrors, 1)+
		"group next {\n\tkind vllm\n\tproxy "+nextSrv.URL()+"\n\tprobe {\n\t\thealth_interval 1m\n\t}\n}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last *http.Response
	sdk := anthropicClient(messagesKey, &last)
	if _, err := sdk.Messages.New(ctx, messageParams("chat-main")); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "chat-main", Messages: messageParams("chat-main").Messages}); err != nil {
		t.Fatal(err)
	}
	copies := func() (n int, last simulator.RecordedRequest) {
		for _, r := range next.Requests() {
			if r.Method == http.MethodPost {
				n, last = n+1, r
			}
		}
		return n, last
	}
	waitFor(t, "the copy at next", func() bool { n, _ := copies(); return n > 0 })
	n, c := copies()
	if n != 1 || c.Path != "/v1/messages" || gjson.GetBytes(c.Body, "model").String() != "qwen-next" || c.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("next got %d copies, the last %s %v %s", n, c.Path, c.Header, c.Body)
	}
	for _, p := range e.cloudPosts() {
		t.Errorf("the cloud got a copy: %s", p.Path)
	}
}
