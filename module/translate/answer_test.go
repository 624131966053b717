// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"testing"
)

// Chat answers from OpenAI's documentation and from vLLM, as Messages
// API messages.
func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{{
		name: "text, with cached prompt tokens",
		in: `{"id":"chatcmpl-123","object":"chat.completion","created":1677652288,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how may I assist you today?"},"logprobs":null,"finish_reason":"stop"}],
			"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}}`,
		want: `{"id":"msg_chatcmpl-123","type":"message","role":"assistant","model":"chat-main","content":[{"type":"text","text":"Hello there, how may I assist you today?"}],
			"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":12}}`,
	}, {
		name: "tool calls",
		in: `{"id":"chatcmpl-abc","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_abc123","type":"function","function":{"name":"get_current_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}},
			{"id":"call_def","type":"function","function":{"name":"noop","arguments":""}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99}}`,
		want: `{"id":"msg_chatcmpl-abc","type":"message","role":"assistant","model":"chat-main","content":[
			{"type":"tool_use","id":"call_abc123","name":"get_current_weather","input":{"location":"Boston, MA"}},{"type":"tool_use","id":"call_def","name":"noop","input":{}}],
			"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":82,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":17}}`,
	}, {
		name: "cut at max_tokens",
		in:   `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"The answer is"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3}}`,
		want: `{"id":"msg_x","type":"message","role":"assistant","model":"chat-main","content":[{"type":"text","text":"The answer is"}],
			"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}}`,
	}, {
		name: "vLLM names the stop sequence that ended it",
		in:   `{"id":"chatcmpl-9","model":"qwen","choices":[{"index":0,"message":{"role":"assistant","content":"one, two"},"finish_reason":"stop","stop_reason":"three"}],"usage":{"prompt_tokens":4,"completion_tokens":3}}`,
		want: `{"id":"msg_chatcmpl-9","type":"message","role":"assistant","model":"chat-main","content":[{"type":"text","text":"one, two"}],
			"stop_reason":"stop_sequence","stop_sequence":"three","usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}}`,
	}, {
		name: "a required tool's call, its finish stop (vLLM), without an id",
		in:   `{"id":"v","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
		want: `{"id":"msg_v","type":"message","role":"assistant","model":"chat-main","content":[{"type":"tool_use","id":"toolu_v_0","name":"f","input":{"a":1}}],
			"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":5}}`,
	}, {
		name: "a refusal",
		in:   `{"id":"r","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":6}}`,
		want: `{"id":"msg_r","type":"message","role":"assistant","model":"chat-main","content":[{"type":"text","text":"I can't help with that."}],
			"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":6}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := Whole{Model: []byte(`"chat-main"`)}
			var out bytes.Buffer
			in := []byte(tc.in)
			for len(in) > 0 { // in parts, as a proxy passes it
				n := min(len(in), 7)
				if _, err := w.Pass(&out, in[:n]); err != nil {
					t.Fatal(err)
				}
				in = in[n:]
			}
			if out.Len() != 0 {
				t.Fatalf("written before the end: %s", out.Bytes())
			}
			if err := w.Finish(&out); err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, out.Bytes(), tc.want) {
				t.Errorf("got  %s\nwant %s", out.Bytes(), tc.want)
			}
		})
	}
	// an answer that is not a chat completion passes as it came
	w := Whole{Model: []byte(`"m"`)}
	var out bytes.Buffer
	_, _ = w.Pass(&out, []byte(`{"object":"list"}`))
	if _ = w.Finish(&out); out.String() != `{"object":"list"}` {
		t.Errorf("%s", out.Bytes())
	}
}
