// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

func TestClientCeilings(t *testing.T) {
	clamp := &client{maxTokens: 100, maxN: 2}
	refuse := &client{maxTokens: 100, ceilingMode: ceilingRefuse}
	for _, tc := range []struct {
		name      string
		c         *client
		path      string
		body      string
		want      string // the body sent, or the refused param after "refused:"
		unchanged bool
	}{
		{"under", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":50}`, `{"model":"m","max_tokens":50}`, true},
		{"over, clamped", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":5000}`, `{"model":"m","max_tokens":100}`, false},
		{"new field, clamped", clamp, "/v1/chat/completions", `{"model":"m","max_completion_tokens":5000}`, `{"model":"m","max_completion_tokens":100}`, false},
		{"none, set", clamp, "/v1/chat/completions", `{"model":"m"}`, `{"model":"m","max_completion_tokens":100}`, false},
		{"null, set", clamp, "/v1/completions", `{"model":"m","max_tokens":null}`, `{"model":"m","max_tokens":100}`, false},
		{"responses", clamp, "/v1/responses", `{"model":"m","max_output_tokens":101}`, `{"model":"m","max_output_tokens":100}`, false},
		{"embeddings: no length", clamp, "/v1/embeddings", `{"model":"m","input":"x"}`, `{"model":"m","input":"x"}`, true},
		{"over, refused", refuse, "/v1/chat/completions", `{"model":"m","max_tokens":101}`, "refused:max_tokens", false},
		{"twice", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":1,"max_tokens":5000}`, "refused:max_tokens", false},
		{"n over", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":1,"n":3}`, "refused:n", false},
		{"n under", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":1,"n":2}`, `{"model":"m","max_tokens":1,"n":2}`, true},
	} {
		out, refusal := tc.c.ceil([]byte(tc.body), protocol.ForPath(tc.path))
		switch {
		case refusal != nil:
			if "refused:"+refusal.param != tc.want {
				t.Errorf("%s: refused on %s (%s)", tc.name, refusal.param, refusal.msg)
			}
		case string(out) != tc.want:
			t.Errorf("%s: %s, want %s", tc.name, out, tc.want)
		case tc.unchanged && &out[0] != &[]byte(tc.body)[0] && string(out) != tc.body:
			t.Errorf("%s: changed", tc.name)
		}
	}
}
