// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"strings"
	"testing"
)

// responsesStream is a Responses API stream as OpenAI sends it, framed
// with named events, its model in each lifecycle event's response.
const responsesStream = "event: response.created\ndata: " + `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"qwen-7b","output":[],"usage":null}}` + "\n\n" +
	"event: response.output_text.delta\ndata: " + `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}` + "\n\n" +
	"event: response.completed\ndata: " + `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"qwen-7b",` +
	`"output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hello"}]}],` +
	`"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":8},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":17}}}` + "\n\n"

// A Responses stream: the alias in every event's response, its usage
// and token classes from response.completed, whole there and cut short
// without it; one that tells its own failure (response.failed) ends
// there, with no error of the gateway's after it.
func TestResponsesStream(t *testing.T) {
	for _, whole := range []bool{true, false} {
		stream := responsesStream
		if !whole {
			stream = stream[:strings.Index(stream, "event: response.completed")]
		}
		var out bytes.Buffer
		u := &UsageScanner{SSE: true, Events: EventsResponses, Whole: true, WantFinish: true}
		m := &ModelRewriter{Alias: []byte(`"chat-main"`), SSE: true, Events: EventsResponses}
		for i := 0; i < len(stream); i += 37 {
			_, _ = u.Pass(passer{m, &out}, []byte(stream[i:min(i+37, len(stream))]))
		}
		u.Finish(passer{m, &out}, false)
		m.Finish(&out)
		got := out.String()
		if strings.Contains(got, "qwen-7b") || got != strings.ReplaceAll(stream, `"qwen-7b"`, `"chat-main"`) {
			t.Errorf("whole %v: rewritten stream:\n%s", whole, got)
		}
		if u.Complete() != whole {
			t.Errorf("whole %v: complete %v", whole, u.Complete())
		}
		if whole && (!u.Found || u.Prompt != 12 || u.Cached != 8 || u.Completion != 5 || u.Reasoning != 2) {
			t.Errorf("usage %+v", u.Usage)
		}
	}
}

func TestResponsesStreamThatFails(t *testing.T) {
	stream := responsesStream[:strings.Index(responsesStream, "event: response.completed")] +
		"event: response.failed\ndata: " + `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","status":"failed","model":"qwen-7b","error":{"code":"server_error","message":"The model crashed"}}}` + "\n\n"
	u := &UsageScanner{SSE: true, Events: EventsResponses, Whole: true, WantFinish: true}
	var out bytes.Buffer
	_, _ = u.Pass(&out, []byte(stream))
	u.Finish(&out, false)
	if !u.Complete() || out.String() != stream {
		t.Errorf("complete %v: %s", u.Complete(), out.String())
	}
}
