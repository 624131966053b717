// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import "testing"

// A stream's usage is asked for with one field spliced in before the
// closing brace, or, where the request already has stream_options, by
// setting include_usage in them.
func TestAskStreamUsage(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{`{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"model":"m"} `, `{"stream":true,"model":"m","stream_options":{"include_usage":true}} `, true},
		{`{"model":"m","stream_options":{"continuous_usage_stats":true},"stream":true}`,
			`{"model":"m","stream_options":{"continuous_usage_stats":true,"include_usage":true},"stream":true}`, true},
	} {
		body := []byte(tc.in)
		top, _ := Scan(body)
		at, field, rewritten, ok := AskStreamUsage(body, &top)
		if ok != tc.ok {
			t.Fatalf("%s: ok %v", tc.in, ok)
		}
		got := string(rewritten)
		if rewritten == nil {
			got = string(body[:at]) + string(field) + string(body[at:])
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}
