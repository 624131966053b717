// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"strings"
	"testing"
)

// events reads an event stream as its events' "type: data" lines.
func events(t *testing.T, stream string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\n")
		if !ok || !strings.HasPrefix(name, "event: ") || !strings.HasPrefix(data, "data: ") {
			t.Fatalf("not an event: %q in %q", ev, stream)
		}
		out = append(out, strings.TrimPrefix(name, "event: ")+" "+strings.TrimPrefix(data, "data: "))
	}
	return out
}

// pass runs chat stream in through a Stream in parts of size n and
// returns what it wrote, and whether it was whole.
func pass(t *testing.T, in string, n int) (string, bool) {
	t.Helper()
	s := Stream{Model: []byte(`"chat-main"`)}
	var out bytes.Buffer
	for len(in) > 0 {
		k := min(n, len(in))
		if _, err := s.Pass(&out, []byte(in[:k])); err != nil {
			t.Fatal(err)
		}
		in = in[k:]
	}
	if err := s.Finish(&out); err != nil {
		t.Fatal(err)
	}
	return out.String(), s.Whole()
}

// Chat completion streams (OpenAI's documented chunks, vLLM's, framed
// with \r\n) as the Messages API's events, whatever the parts they come
// in.
func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		whole    bool
		want     []string
	}{{
		name: "text, its usage in the last chunk",
		in: `data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":8}}}` + "\n\n" +
			"data: [DONE]\n\n",
		whole: true,
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_chatcmpl-123","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":1,"cache_read_input_tokens":8,"output_tokens":2}}`,
			`message_stop {"type":"message_stop"}`,
		},
	}, {
		name: "text then two tool calls, framed with \\r\\n",
		in: strings.ReplaceAll(`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me look."}}]}`+"\n\n"+
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`+"\n\n"+
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]}}]}`+"\n\n"+
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"Paris\"}"}}]}}]}`+"\n\n"+
			`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]}`+"\n\n"+
			`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":15}}`+"\n\n"+
			"data: [DONE]\n\n", "\n", "\r\n"),
		whole: true,
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_c1","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"get_weather","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"Paris\"}"}}`,
			`content_block_stop {"type":"content_block_stop","index":1}`,
			`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_2","name":"get_time","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
			`content_block_stop {"type":"content_block_stop","index":2}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":20,"cache_read_input_tokens":0,"output_tokens":15}}`,
			`message_stop {"type":"message_stop"}`,
		},
	}, {
		name: "vLLM's stop sequence, its end without [DONE]",
		in: `data: {"id":"v","choices":[{"index":0,"delta":{"content":"one, two"}}]}` + "\n\n" +
			`data: {"id":"v","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"three"}],"usage":{"prompt_tokens":4,"completion_tokens":3}}` + "\n\n",
		whole: true,
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_v","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"one, two"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"three"},"usage":{"input_tokens":4,"cache_read_input_tokens":0,"output_tokens":3}}`,
			`message_stop {"type":"message_stop"}`,
		},
	}, {
		name: "cut before its finish_reason: no message_stop, the caller's to tell",
		in: `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Once upon"}}]}` + "\n\n" +
			`data: {"error":{"message":"engine died","type":"InternalServerError","code":500}}` + "\n\n",
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_c","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Once upon"}}`,
		},
	}, {
		name: "cut at max_tokens, its usage after the finish",
		in: `data: {"id":"m","choices":[{"index":0,"delta":{"content":"one"}}]}` + "\n\n" +
			`data: {"id":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n" +
			`data: {"id":"m","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}` + "\n\n" + "data: [DONE]\n\n",
		whole: true,
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_m","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"one"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":4,"cache_read_input_tokens":0,"output_tokens":1}}`,
			`message_stop {"type":"message_stop"}`,
		},
	}, {
		name: "a tool call's id on every chunk, a required tool's finish stop (vLLM)",
		in: `data: {"id":"v","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_A","type":"function","function":{"name":"f","arguments":""}}]}}]}` + "\n\n" +
			`data: {"id":"v","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_A","function":{"arguments":"{\"a\":1}"}}]}}]}` + "\n\n" +
			`data: {"id":"v","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n",
		whole: true,
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_v","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"call_A","name":"f","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`,
			`message_stop {"type":"message_stop"}`,
		},
	}, {
		name: "parallel calls without ids, their arguments interleaved",
		in: `data: {"id":"p","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"a","arguments":"{\"x\""}},{"index":1,"function":{"name":"b","arguments":"{\"y\""}}]}}]}` + "\n\n" +
			`data: {"id":"p","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}},{"index":1,"function":{"arguments":":2}"}}]}}]}` + "\n\n" +
			`data: {"id":"p","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" + "data: [DONE]\n\n",
		whole: true,
		want: []string{
			`message_start {"type":"message_start","message":{"id":"msg_p","type":"message","role":"assistant","model":"chat-main","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`,
			`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_p_0","name":"a","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"x\""}}`,
			`content_block_stop {"type":"content_block_stop","index":0}`,
			`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_p_1","name":"b","input":{}}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"y\""}}`,
			`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":":1}"}}`,
			`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":":2}"}}`,
			`content_block_stop {"type":"content_block_stop","index":1}`,
			`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`,
			`message_stop {"type":"message_stop"}`,
		},
	}} {
		for _, n := range []int{1, 5, 1 << 20} {
			got, whole := pass(t, tc.in, n)
			if whole != tc.whole {
				t.Errorf("%s, in parts of %d: whole %v", tc.name, n, whole)
			}
			if ev := events(t, got); strings.Join(ev, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("%s, in parts of %d:\n got  %s\n want %s", tc.name, n, strings.Join(ev, "\n      "), strings.Join(tc.want, "\n      "))
			}
		}
	}
}
