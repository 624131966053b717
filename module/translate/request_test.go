// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the wanted text is not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

// Requests from Anthropic's Messages API documentation and from what
// Claude Code sends, as a chat-only target gets them.
func TestToChat(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		o    Options
		want string
	}{{
		name: "the documentation's first request",
		in:   `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hello, Claude"}]}`,
		want: `{"model":"qwen","messages":[{"role":"user","content":"Hello, Claude"}],"max_tokens":1024}`,
	}, {
		name: "a system prompt in blocks with cache_control, as Claude Code sends it, and a stream",
		in: `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"temperature":1,"metadata":{"user_id":"user_abc"},
			"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be brief."}],
			"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"fix the bug","cache_control":{"type":"ephemeral"}}]}]}`,
		o: Options{MaxTokensField: "max_completion_tokens"},
		want: `{"model":"qwen","messages":[{"role":"system","content":"You are Claude Code.\nBe brief."},
			{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"fix the bug"}]}],
			"max_completion_tokens":32000,"temperature":1,"user":"user_abc","stream":true,"stream_options":{"include_usage":true}}`,
	}, {
		name: "multi-turn text, stop sequences, top_p",
		in: `{"model":"m","max_tokens":50,"stop_sequences":["\n\nHuman:"],"top_p":0.9,"system":"Answer in French.",
			"messages":[{"role":"user","content":"Hello there."},{"role":"assistant","content":"Hi, I'm Claude. How can I help you?"},{"role":"user","content":"Can you explain LLMs in plain English?"}]}`,
		want: `{"model":"qwen","messages":[{"role":"system","content":"Answer in French."},{"role":"user","content":"Hello there."},
			{"role":"assistant","content":"Hi, I'm Claude. How can I help you?"},{"role":"user","content":"Can you explain LLMs in plain English?"}],
			"max_tokens":50,"stop":["\n\nHuman:"],"top_p":0.9}`,
	}, {
		name: "images inline and by URL",
		in: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
			{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
			{"type":"text","text":"What is in these images?"}]}]}`,
		want: `{"model":"qwen","messages":[{"role":"user","content":[
			{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
			{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}},
			{"type":"text","text":"What is in these images?"}]}],"max_tokens":10}`,
	}, {
		name: "a tool-use round trip: tools, the assistant's call, the user's result and more text",
		in: `{"model":"m","max_tokens":1024,
			"tools":[{"name":"get_weather","description":"Get the current weather in a given location","input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]},"cache_control":{"type":"ephemeral"}}],
			"tool_choice":{"type":"any","disable_parallel_tool_use":true},
			"messages":[{"role":"user","content":"What's the weather like in San Francisco?"},
			{"role":"assistant","content":[{"type":"text","text":"I'll check."},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":"15 degrees"},{"type":"text","text":"And tomorrow?"}]}]}`,
		want: `{"model":"qwen","messages":[{"role":"user","content":"What's the weather like in San Francisco?"},
			{"role":"assistant","tool_calls":[{"id":"toolu_01A09q90qw90lq917835lq9","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"San Francisco, CA\"}"}}],"content":"I'll check."},
			{"role":"tool","tool_call_id":"toolu_01A09q90qw90lq917835lq9","content":"15 degrees"},
			{"role":"user","content":[{"type":"text","text":"And tomorrow?"}]}],"max_tokens":1024,
			"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a given location","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}],
			"tool_choice":"required","parallel_tool_calls":false}`,
	}, {
		name: "a tool result in blocks, an error, two calls answered at once, a named tool choice",
		in: `{"model":"m","max_tokens":5,"tool_choice":{"type":"tool","name":"a"},"tools":[{"name":"a","input_schema":{"type":"object"}},{"type":"custom","name":"b","input_schema":{"type":"object"}}],
			"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"a","input":{}},{"type":"tool_use","id":"t2","name":"b","input":{"x":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"line 1"},{"type":"text","text":"line 2"}]},{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"no such file"}]}]}`,
		want: `{"model":"qwen","messages":[
			{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"t2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]},
			{"role":"tool","tool_call_id":"t1","content":"line 1\nline 2"},{"role":"tool","tool_call_id":"t2","content":"no such file"}],"max_tokens":5,
			"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}],
			"tool_choice":{"type":"function","function":{"name":"a"}}}`,
	}, {
		name: "top_k and a prefill to a vLLM",
		in:   `{"model":"m","max_tokens":5,"top_k":40,"messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"The colour is"}]}`,
		o:    Options{VLLM: true},
		want: `{"model":"qwen","messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"The colour is"}],"max_tokens":5,"top_k":40,
			"continue_final_message":true,"add_generation_prompt":false}`,
	}, {
		name: "thinking dropped when the target allows it",
		in: `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Hello"}]},{"role":"user","content":"again"}]}`,
		o:    Options{Lossy: true},
		want: `{"model":"qwen","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"again"}],"max_tokens":2000}`,
	}, {
		name: "Claude Code's billing header left out of the system prompt; a screenshot a tool read, after its result",
		in: `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.0.14; cch=8f3a"},{"type":"text","text":"You are Claude Code."}],
			"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"shot.png"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"the screenshot:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]},{"type":"text","text":"what is wrong?"}]}]}`,
		want: `{"model":"qwen","messages":[{"role":"system","content":"You are Claude Code."},
			{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"shot.png\"}"}}]},
			{"role":"tool","tool_call_id":"t1","content":"the screenshot:"},
			{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}}]},
			{"role":"user","content":[{"type":"text","text":"what is wrong?"}]}],"max_tokens":5}`,
	}, {
		name: "lossy, only Anthropic's own tools: no tools, no tool choice",
		in:   `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"hi"}]}`,
		o:    Options{Lossy: true},
		want: `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
	}, {
		name: "a stream to a target that takes no stream_options",
		in:   `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		o:    Options{NoStreamUsage: true},
		want: `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.Model == nil {
				tc.o.Model = []byte(`"qwen"`)
			}
			got, err := ToChat([]byte(tc.in), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, tc.want) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// What chat cannot carry is named, and refused unless the target allows
// the loss.
func TestLosses(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		vllm     bool
		want     []string
	}{
		{name: "none", in: `{"model":"m","max_tokens":1,"thinking":{"type":"disabled"},"service_tier":"auto","messages":[{"role":"user","content":"hi"}]}`},
		{name: "extended thinking", in: `{"model":"m","max_tokens":1,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[]}`, want: []string{"thinking"}},
		{name: "a thinking block in the history", in: `{"model":"m","messages":[{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"}]},{"role":"user","content":"go on"}]}`, want: []string{"thinking"}},
		{name: "a document and an image by file id", in: `{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x"}},{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`,
			want: []string{"document", "image file"}},
		{name: "an image file and a document in a tool result", in: `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"file","file_id":"f"}},{"type":"document","source":{"type":"text","data":"x"}}]}]}]}`,
			want: []string{"image file", "tool_result document"}},
		{name: "Anthropic's own tools", in: `{"model":"m","tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"bash_20250124","name":"bash"}],"messages":[]}`,
			want: []string{"tool web_search_20250305", "tool bash_20250124"}},
		{name: "a field chat does not know", in: `{"model":"m","mcp_servers":[],"container":"c","messages":[]}`, want: []string{"mcp_servers", "container"}},
		{name: "more stop sequences than OpenAI takes", in: `{"model":"m","stop_sequences":["a","b","c","d","e"],"messages":[]}`, want: []string{"stop_sequences over 4"}},
		{name: "as many as vLLM takes", in: `{"model":"m","stop_sequences":["a","b","c","d","e"],"messages":[]}`, vllm: true},
		{name: "top_k and a prefill to OpenAI", in: `{"model":"m","top_k":5,"messages":[{"role":"assistant","content":"The"}]}`, want: []string{"top_k", "assistant prefill"}},
		{name: "top_k and a prefill to vLLM", in: `{"model":"m","top_k":5,"messages":[{"role":"assistant","content":"The"}]}`, vllm: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Losses([]byte(tc.in), tc.vllm)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%q, want %q", got, tc.want)
			}
			_, err := ToChat([]byte(tc.in), Options{Model: []byte(`"x"`), VLLM: tc.vllm})
			if (err == ErrLoss) != (len(tc.want) > 0) {
				t.Errorf("ToChat: %v", err)
			}
		})
	}
	if _, err := ToChat([]byte(`{"model":"m"}`), Options{Model: []byte(`"x"`)}); err != ErrNotMessages {
		t.Errorf("no messages: %v", err)
	}
}
