// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// An Anthropic stream as its API sends it (and vLLM's /v1/messages, but
// for the ping and the cache counts): named events, the model in
// message_start's message, the input there and the output a running total
// in message_delta.
const anthropicStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"qwen-7b","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":3,"cache_read_input_tokens":100,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

// The usage of an Anthropic stream, in whatever pieces and framing: the
// prompt is the input with the cache read and written (Anthropic's
// input_tokens leave them out), the output the last running total, not a
// sum; the stream is whole at its message_stop, and not before.
func TestAnthropicStreamUsage(t *testing.T) {
	for _, crlf := range []bool{false, true} {
		stream := anthropicStream
		if crlf {
			stream = strings.ReplaceAll(stream, "\n", "\r\n")
		}
		for _, piece := range []int{1, 5, 64, 1 << 20} {
			u := &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
			if got := feed(u, stream, piece); got != stream {
				t.Fatalf("crlf %v, piece %d: changed:\n%q", crlf, piece, got)
			}
			if !u.Found || u.Prompt != 128 || u.Cached != 100 || u.Completion != 15 || !u.Complete() || u.Bad {
				t.Errorf("crlf %v, piece %d: %+v complete %v", crlf, piece, u.Usage, u.Complete())
			}
			if u.TextEvents != 2 || u.TextBytes != int64(len("Hello there")) {
				t.Errorf("crlf %v, piece %d: text tallied %d events, %d bytes", crlf, piece, u.TextEvents, u.TextBytes)
			}
		}
	}
	// cut before its message_stop: not whole, whatever the stop_reason said
	cut := anthropicStream[:strings.Index(anthropicStream, "event: message_stop")]
	u := &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
	if feed(u, cut, 7); u.Complete() || u.Completion != 15 {
		t.Errorf("cut before message_stop: complete %v, %+v", u.Complete(), u.Usage)
	}
	// cut before its message_delta: the prompt's counts, and no answer's
	// yet (its output_tokens of message_start are not the answer's)
	early := anthropicStream[:strings.Index(anthropicStream, "event: message_delta")]
	u = &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
	if feed(u, early, 11); u.Found || !u.Partial || u.Prompt != 128 || u.Cached != 100 || u.Completion != 0 {
		t.Errorf("cut before message_delta: %+v", u.Usage)
	}
	// an upstream's error event ends it: not passed on (the gateway sends
	// its own), its message kept
	errored := cut + "event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
	u = &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
	if got := feed(u, errored, 9); got != cut || !u.Errored || u.UpstreamError != "Overloaded" || u.Complete() {
		t.Errorf("error event: passed %q, errored %v %q", got[max(0, len(got)-60):], u.Errored, u.UpstreamError)
	}
	// spaced as Python's json.dumps writes it (a LiteLLM or other proxy
	// of the API): the same counts
	spaced := strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(anthropicStream)
	u = &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
	if feed(u, spaced, 13); !u.Found || u.Prompt != 128 || u.Cached != 100 || u.Completion != 15 || !u.Complete() {
		t.Errorf("spaced stream: %+v complete %v", u.Usage, u.Complete())
	}
	u = &UsageScanner{Events: EventsAnthropic}
	if feed(u, `{"type": "message", "usage": {"input_tokens": 12, "cache_read_input_tokens": 40, "output_tokens": 7}}`, 6); u.Prompt != 52 || u.Cached != 40 || u.Completion != 7 {
		t.Errorf("spaced body: %+v", u.Usage)
	}
	// a message_stop inside a block's content is no end
	inner := "event: content_block_start\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{"type":"message_stop"}}}` + "\n\n"
	u = &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
	if feed(u, cut[:strings.Index(cut, "event: message_delta")]+inner, 17); u.Complete() {
		t.Error("a nested message_stop ended the stream")
	}
	// a non-streamed answer
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"qwen-7b","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_read_input_tokens":40,"output_tokens":7}}`
	u = &UsageScanner{Events: EventsAnthropic}
	if feed(u, body, 10); !u.Found || u.Prompt != 52 || u.Cached != 40 || u.Completion != 7 {
		t.Errorf("json body: %+v", u.Usage)
	}
	// the Responses API's input_tokens count its cached ones: not added
	u = &UsageScanner{}
	if feed(u, `{"usage":{"input_tokens":52,"input_tokens_details":{"cached_tokens":40},"output_tokens":7}}`, 10); u.Prompt != 52 || u.Cached != 40 {
		t.Errorf("responses: %+v", u.Usage)
	}
}

// The alias goes into message_start's message, wherever its model is, and
// into a non-streamed answer's top; nothing else changes.
func TestAnthropicModelRewrite(t *testing.T) {
	var out bytes.Buffer
	u := &UsageScanner{SSE: true, Events: EventsAnthropic, Whole: true, WantFinish: true}
	m := &ModelRewriter{Alias: []byte(`"claude-main"`), SSE: true, Events: EventsAnthropic}
	for _, p := range []string{anthropicStream[:40], anthropicStream[40:300], anthropicStream[300:]} {
		_, _ = u.Pass(passer{m, &out}, []byte(p))
	}
	u.Finish(passer{m, &out}, false)
	m.Finish(&out)
	got := out.String()
	if strings.Contains(got, "qwen-7b") || got != strings.Replace(anthropicStream, `"qwen-7b"`, `"claude-main"`, 1) {
		t.Errorf("rewritten stream:\n%s", got)
	}
	first := got[strings.Index(got, "data: ")+6 : strings.Index(got, "\n\n")]
	if gjson.Get(first, "message.model").String() != "claude-main" {
		t.Errorf("message_start: %s", first)
	}
}

// passer hands the scanner's whole events to a model rewriter.
type passer struct {
	m   *ModelRewriter
	out *bytes.Buffer
}

func (p passer) Write(b []byte) (int, error) { return p.m.Pass(p.out, b) }

// The Messages API's error shape: the type told by the status, the
// gateway's own and an upstream's; Anthropic's own passed as it came,
// unless it names the served model.
func TestAnthropicErrors(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error", 429: "rate_limit_error",
		500: "api_error", 502: "api_error", 503: "overloaded_error", 529: "overloaded_error", 504: "timeout_error"} {
		b := AnthropicErrors.Body(Error{Status: status, Type: TypeInvalidRequest, Message: "m"})
		if want := `{"type":"error","error":{"type":"` + typ + `","message":"m"}}`; string(b) != want {
			t.Errorf("%d: %s, want %s", status, b, want)
		}
	}
	ev := string(AnthropicErrors.StreamEvent(Error{Type: TypeServer, Code: "stream_interrupted", Message: "cut"}))
	if want := "event: error\ndata: " + `{"type":"error","error":{"type":"api_error","message":"cut"}}` + "\n\n"; ev != want {
		t.Errorf("stream event %q, want %q", ev, want)
	}
	own := `{"type":"error","error":{"type":"invalid_request_error","message":"thinking: Extra inputs are not permitted"},"request_id":"req_1"}`
	if got := string(AnthropicErrors.Upstream([]byte(own), 400, "qwen-7b", "claude-main")); got != own {
		t.Errorf("Anthropic's own error changed: %s", got)
	}
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"type":"error","error":{"type":"BadRequestError","message":"qwen-7b cannot take images"}}`, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"claude-main cannot take images"}}`},
		{`{"error":{"message":"The model qwen-7b is busy","type":"server_error","code":null}}`, 503, `{"type":"error","error":{"type":"overloaded_error","message":"The model claude-main is busy"}}`},
		{`<html>Bad Gateway</html>`, 502, `{"type":"error","error":{"type":"api_error","message":"\u003chtml\u003eBad Gateway\u003c/html\u003e"}}`},
		{`{"detail":"Not Found"}`, 404, `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`},
	} {
		if got := string(AnthropicErrors.Upstream([]byte(tc.body), tc.status, "qwen-7b", "claude-main")); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.body, got, tc.want)
		}
	}
	if !AnthropicErrors.ModelNotFound([]byte(`{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`)) ||
		!AnthropicErrors.ModelNotFound([]byte(`{"type":"error","error":{"type":"NotFoundError","message":"The model `+"`x`"+` does not exist."}}`)) ||
		AnthropicErrors.ModelNotFound([]byte(`{"type":"error","error":{"type":"not_found_error","message":"file not found"}}`)) {
		t.Error("a missing model told from another 404")
	}
	if !AnthropicErrors.ContextLength([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208000 tokens > 200000 maximum"}}`)) ||
		!AnthropicErrors.ContextLength([]byte(`{"type":"error","error":{"type":"BadRequestError","message":"This model's maximum context length is 8192 tokens."}}`)) {
		t.Error("a context-length error not told")
	}
}
