// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// The Messages API translated into chat completions for targets that
// speak only those, with the Anthropic Go SDK as the client and, as the
// upstream, a chat-only cloud of the test's own: it serves /v1/chat/
// completions and nothing else, calls a tool until it has the tool's
// result, compresses what it can, frames its streams with \r\n and
// reports cached prompt tokens, as OpenAI does.

// toolCloud is a chat-only cloud that asks for the weather tool first.
type toolCloud struct {
	srv *simulator.Server
	mu  sync.Mutex
	got []string // the chat requests' bodies
}

func newToolCloud(t *testing.T) *toolCloud {
	c := &toolCloud{}
	c.srv = standIn(t, c.serve)
	return c
}

func (c *toolCloud) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func (c *toolCloud) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-tool-cloud" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"Invalid URL (`+r.Method+" "+r.URL.Path+`)","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.got = append(c.got, string(body))
	c.mu.Unlock()
	model := gjson.GetBytes(body, "model").String()
	usage := `{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129,"prompt_tokens_details":{"cached_tokens":100}}`
	answered := strings.Contains(string(body), `"role":"tool"`)
	if gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "text/event-stream")
		var chunks []string
		if answered {
			chunks = []string{`{"role":"assistant","content":"It is 15 degrees"}`, `{"content":" in Paris."}`}
		} else {
			chunks = []string{`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_w1","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
				`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, `{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`}
		}
		finish := "stop"
		if !answered {
			finish = "tool_calls"
		}
		for _, d := range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-t\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\r\n\r\n", model, d)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-t\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\r\n\r\n", model, finish)
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-t\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":%s}\r\n\r\ndata: [DONE]\r\n\r\n", model, usage)
		return
	}
	msg := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_w1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
	finish := "tool_calls"
	if answered {
		msg, finish = `{"role":"assistant","content":"It is 15 degrees in Paris."}`, "stop"
	}
	w.Header().Set("Content-Type", "application/json")
	out := io.Writer(w)
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		out = zw
	}
	fmt.Fprintf(out, `{"id":"chatcmpl-t","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`,
		model, msg, finish, usage)
}

// weatherParams is a request with the weather tool, and the turns so far.
func weatherParams(model string, turns ...anthropic.MessageParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: "You are a coding agent.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather in a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}},
		Messages: append([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}, turns...),
	}
}

// A tool-use round trip through a chat-only cloud, whole and streamed:
// the SDK gets the cloud's tool call as a tool_use block, sends its
// result back as a tool_result, and gets the answer; the cloud gets chat
// requests (the tool as a function, the call and its result as
// tool_calls and a tool message); the tokens metered and charged are the
// cloud's, its cached ones among the prompt's at their price.
func TestMessagesTranslatedToolUse(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	cloud := newToolCloud(t)
	loadMessages(t, e, messagesGateway+"group tools {\n\tkind openai\n\tapi_key sk-tool-cloud\n\tproxy "+cloud.srv.URL()+"\n\tcost {\n\t\tinput_per_million 1\n\t\tcached_input_per_million 0.1\n\t\toutput_per_million 4\n\t}\n}\n"+
		"alias coder {\n\ttarget tools gpt-tools\n}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last *http.Response
	sdk := anthropicClient(messagesKey, &last)

	for _, stream := range []bool{false, true} {
		ask := func(params anthropic.MessageNewParams) anthropic.Message {
			t.Helper()
			if !stream {
				msg, err := sdk.Messages.New(ctx, params)
				if err != nil {
					t.Fatalf("stream %v: %v", stream, err)
				}
				return *msg
			}
			s := sdk.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			return acc
		}
		first := ask(weatherParams("coder"))
		if first.Model != "coder" || first.StopReason != anthropic.StopReasonToolUse || len(first.Content) != 1 ||
			first.Content[0].Type != "tool_use" || first.Content[0].Name != "get_weather" || string(first.Content[0].Input) != `{"city":"Paris"}` ||
			last.Header.Get("X-Hybrid-Translated") != "chat/completions" {
			t.Fatalf("stream %v: the tool call: %+v %v", stream, first, last.Header)
		}
		if first.Usage.InputTokens != 20 || first.Usage.CacheReadInputTokens != 100 || first.Usage.OutputTokens != 9 {
			t.Errorf("stream %v: usage %+v", stream, first.Usage)
		}
		second := ask(weatherParams("coder", first.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(first.Content[0].ID, "15 degrees, clear", false))))
		if second.StopReason != anthropic.StopReasonEndTurn || len(second.Content) != 1 || second.Content[0].Text != "It is 15 degrees in Paris." {
			t.Fatalf("stream %v: the answer: %+v", stream, second)
		}
	}
	bodies := cloud.bodies()
	if len(bodies) != 4 {
		t.Fatalf("the cloud got %d requests", len(bodies))
	}
	for _, b := range bodies {
		if gjson.Get(b, "model").String() != "gpt-tools" || gjson.Get(b, "messages.0.role").String() != "system" ||
			gjson.Get(b, "tools.0.function.name").String() != "get_weather" || gjson.Get(b, "tools.0.function.parameters.required.0").String() != "city" ||
			gjson.Get(b, "max_tokens").Int() != 256 || strings.Contains(b, "cache_control") {
			t.Errorf("a chat request: %s", b)
		}
	}
	round := bodies[1]
	if gjson.Get(round, "messages.2.tool_calls.0.id").String() != "call_w1" || gjson.Get(round, "messages.2.tool_calls.0.function.arguments").String() != `{"city":"Paris"}` ||
		gjson.Get(round, "messages.3.role").String() != "tool" || gjson.Get(round, "messages.3.tool_call_id").String() != "call_w1" ||
		gjson.Get(round, "messages.3.content").String() != "15 degrees, clear" {
		t.Errorf("the round trip's chat request: %s", round)
	}
	if !gjson.Get(bodies[2], "stream_options.include_usage").Bool() {
		t.Errorf("a stream without its usage asked for: %s", bodies[2])
	}
	// each answer: 120 prompt tokens (100 of them cached), 9 completion
	gw := e.gatewayName()
	waitFor(t, "the four answers metered", func() bool {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "tools", "kind": "completion"}) == 36
	})
	if p := metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "tools", "kind": "prompt"}); p != 480 {
		t.Errorf("prompt tokens %v, want 480", p)
	}
	// each answer costs 20 input tokens at 1 USD a million, 100 cached
	// at 0.1, 9 output at 4
	rec := e.accessLog(last.Header.Get("X-Request-Id"))
	if cost, _ := rec["llm_cost_usd"].(float64); rec["llm_translated_to"] != "chat/completions" || rec["llm_prompt_tokens"] != float64(120) ||
		rec["llm_cached_tokens"] != float64(100) || rec["llm_completion_tokens"] != float64(9) || math.Abs(cost-66e-6) > 1e-12 {
		t.Errorf("access log: %v", rec)
	}
	if c := metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "tools", "kind": "prompt_cached"}); c != 400 {
		t.Errorf("cached prompt tokens %v, want 400", c)
	}
}

// A Messages request falls back from a group that speaks the API (a vLLM
// that refuses connections) to one that does not (an OpenAI cloud):
// translated, whole and streamed, the alias as its model.
func TestMessagesFallBackTranslated(t *testing.T) {
	e, ctx := messagesEnv(t, simulator.VLLMConfig{})
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	var last *http.Response
	sdk := anthropicClient(messagesKey, &last)
	msg, err := sdk.Messages.New(ctx, messageParams("chat-main"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Model != "chat-main" || len(msg.Content) != 1 || msg.Content[0].Text == "" || last.Header.Get("X-Hybrid-Target") != "cloud" ||
		last.Header.Get("X-Hybrid-Translated") != "chat/completions" || !strings.HasPrefix(last.Header.Get("X-Hybrid-Fallback-Reason"), "self:") {
		t.Fatalf("message %+v, headers %v", msg, last.Header)
	}
	stream := sdk.Messages.NewStreaming(ctx, messageParams("chat-main"))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || acc.Model != "chat-main" || len(acc.Content) != 1 || acc.Content[0].Text == "" || acc.Usage.OutputTokens == 0 {
		t.Fatalf("stream %+v: %v", acc, err)
	}
	for _, p := range e.cloudPosts() {
		if p.Path != "/v1/chat/completions" || gjson.GetBytes(p.Body, "model").String() != cloudModel || gjson.GetBytes(p.Body, "system").Exists() {
			t.Errorf("the cloud got %s %s", p.Path, p.Body)
		}
	}
	raw, _ := json.Marshal(acc)
	if strings.Contains(string(raw), cloudModel) {
		t.Errorf("the served model's name reached the client: %s", raw)
	}
}
