// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
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

// anthropicAPI is Anthropic's API as it answers: its key in x-api-key
// with an anthropic-version (a Bearer key is refused), the Messages API
// with prompt caching's usage, its models listed by /v1/models in pages,
// and nothing else.
type anthropicAPI struct {
	srv *simulator.Server
	mu  sync.Mutex
	got []http.Header
}

const anthropicUpKey = "sk-ant-api03-upstream"

func newAnthropicAPI(t *testing.T) *anthropicAPI {
	a := &anthropicAPI{}
	a.srv = standIn(t, a.serve)
	return a
}

func (a *anthropicAPI) headers() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.got...)
}

func (a *anthropicAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.got = append(a.got, r.Header.Clone())
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fail := func(status int, typ, msg string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
	}
	switch {
	case r.Header.Get("X-Api-Key") != anthropicUpKey:
		fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case r.Header.Get("Anthropic-Version") == "":
		fail(http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		// dated ids; the names without their date are aliases
		fmt.Fprint(w, `{"data":[{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}],"has_more":false,"first_id":"claude-sonnet-4-5-20250929","last_id":"claude-sonnet-4-5-20250929"}`)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
		fail(http.StatusNotFound, "not_found_error", "Not Found")
		return
	}
	body, _ := io.ReadAll(r.Body)
	model := gjson.GetBytes(body, "model").Str
	const usage = `"usage":{"input_tokens":20,"cache_creation_input_tokens":1500,"cache_read_input_tokens":8000,"output_tokens":30}`
	if !gjson.GetBytes(body, "stream").Bool() {
		fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"Hello from Claude"}],"stop_reason":"end_turn","stop_sequence":null,%s}`, model, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range []string{
		`message_start`, fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":1500,"cache_read_input_tokens":8000,"output_tokens":1}}}`, model),
		`content_block_start`, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`ping`, `{"type": "ping"}`,
		`content_block_delta`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from Claude"}}`,
		`content_block_stop`, `{"type":"content_block_stop","index":0}`,
		`message_delta`, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":30}}`,
		`message_stop`, `{"type":"message_stop"}`,
	} {
		if strings.HasPrefix(ev, "{") {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		} else {
			fmt.Fprintf(w, "event: %s\n", ev)
		}
	}
}

// An anthropic group: Claude Code's requests overflow from a vLLM to
// Anthropic's API with the group's key in x-api-key and an
// anthropic-version (never a Bearer, never the client's key), whole and
// streamed, the alias as the answer's model; the prompt's cache reads and
// writes charged at their prices; its models checked by /v1/models; a
// chat request is not its to serve.
func TestMessagesToAnAnthropicGroup(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	up := newAnthropicAPI(t)
	loadMessages(t, e, messagesGateway+"group claude {\n\tkind anthropic\n\tapi_key "+anthropicUpKey+"\n\tproxy "+up.srv.URL()+
		"\n\tcost {\n\t\tinput_per_million 3\n\t\tcached_input_per_million 0.3\n\t\tcache_write_per_million 3.75\n\t\toutput_per_million 15\n\t}\n}\n"+
		"alias coder {\n\ttarget self "+selfModel+"\n\ttarget claude claude-sonnet-4-5\n}\n")
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last *http.Response
	sdk := anthropicClient(messagesKey, &last)
	// 20 input tokens at 3 USD a million, 8,000 read from the cache at
	// 0.3, 1,500 written to it at 3.75, 30 output at 15
	const cost = (20*3 + 8000*0.3 + 1500*3.75 + 30*15) / 1e6
	for _, stream := range []bool{false, true} {
		var msg anthropic.Message
		if stream {
			s := sdk.Messages.NewStreaming(ctx, messageParams("coder"))
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			m, err := sdk.Messages.New(ctx, messageParams("coder"))
			if err != nil {
				t.Fatal(err)
			}
			msg = *m
		}
		if msg.Model != "coder" || len(msg.Content) != 1 || msg.Content[0].Text != "Hello from Claude" || msg.Usage.CacheReadInputTokens != 8000 ||
			last.Header.Get("X-Hybrid-Target") != "claude" {
			t.Fatalf("stream %v: %+v from %q", stream, msg, last.Header.Get("X-Hybrid-Target"))
		}
		id := last.Header.Get("X-Request-Id")
		waitFor(t, "the answer's record", func() bool { return e.accessLog(id) != nil })
		rec := e.accessLog(id)
		if c, _ := rec["llm_cost_usd"].(float64); math.Abs(c-cost) > 1e-12 || rec["llm_prompt_tokens"] != float64(9520) ||
			rec["llm_cached_tokens"] != float64(8000) || rec["llm_cache_write_tokens"] != float64(1500) || rec["llm_completion_tokens"] != float64(30) {
			t.Errorf("stream %v: the record: %v", stream, rec)
		}
	}
	for _, h := range up.headers() {
		if h.Get("X-Api-Key") != anthropicUpKey || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Authorization") != "" {
			t.Errorf("the API got %v", h)
		}
		for _, v := range h {
			if strings.Contains(strings.Join(v, " "), messagesKey) {
				t.Errorf("the client's key reached the API: %v", h)
			}
		}
	}
	waitFor(t, "the model check", func() bool {
		for _, g := range getState(t).Gateways {
			for _, grp := range g.Groups {
				if mc := grp.ModelCheck; grp.Name == "claude" && mc != nil && mc.CheckedAt != nil {
					return len(mc.Missing) == 0
				}
			}
		}
		return false
	})

	// a chat request: no target of the alias's group speaks it
	loadMessages(t, e, messagesGateway+"group claude {\n\tkind anthropic\n\tapi_key "+anthropicUpKey+"\n\tproxy "+up.srv.URL()+"\n}\n"+
		"alias claude-only {\n\ttarget claude claude-sonnet-4-5\n}\n")
	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "claude-only", 1), "Authorization", "Bearer "+messagesKey)
	if resp.StatusCode != http.StatusNotFound || gjson.GetBytes(body, "error.code").Str != "api_not_served" {
		t.Errorf("chat to an anthropic group: %d %s", resp.StatusCode, body)
	}
}
