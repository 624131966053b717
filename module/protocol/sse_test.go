// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import "testing"

// endOf tells the events that end a completion stream before its finish:
// vLLM's error event in both its shapes, and [DONE]; a chunk that merely
// mentions an error goes on.
func TestEndOf(t *testing.T) {
	for _, tc := range []struct {
		ev   string
		want streamEnd
		msg  string
	}{
		{"data: [DONE]\n\n", streamDone, ""},
		{"data:[DONE]\r\n\r\n", streamDone, ""},
		{`data: {"error":{"message":"engine dead","type":"InternalServerError","param":null,"code":500}}` + "\n\n", streamError, "engine dead"},
		{`data: {"object":"error","message":"out of memory","type":"InternalServerError","param":null,"code":500}` + "\r\r", streamError, "out of memory"},
		{"event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n", streamError, "x"},
		{`data: {"error":"Input validation error: too long"}` + "\n\n", streamError, "Input validation error: too long"},
		{`data: {"id":"c","choices":[{"delta":{"content":"\"error\""}}]}` + "\n\n", streamGoesOn, ""},
		{`data: {"id":"c","choices":[{"delta":{"content":"hi"}}],"error":null}` + "\n\n", streamGoesOn, ""},
		{": keep-alive\n\n", streamGoesOn, ""},
		{"\n", streamGoesOn, ""},
	} {
		if got, msg := endOf([]byte(tc.ev)); got != tc.want || msg != tc.msg {
			t.Errorf("%q: %v %q, want %v %q", tc.ev, got, msg, tc.want, tc.msg)
		}
	}
}
