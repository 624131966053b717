// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{}`, 1},
		{`{"messages":[]}`, 1},
		{`{"messages":[{"role":"user","content":"abcd"}]}`, 1},
		{`{"messages":[{"role":"user","content":"abcde"}]}`, 2},
		{`{"messages":[{"role":"system","content":"abcd"},{"role":"user","content":"abcd"}]}`, 2},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"abcdefgh"},{"type":"text","text":"ij"}]}]}`, 3},
		{`{"messages":[{"role":"user","content":"héllo wörld"}]}`, 3}, // 11 code points
		{`{"prompt":"abcdefghi"}`, 3},
		{`{"prompt":["abcd","efgh"]}`, 2},
		{`{"prompt":[1,2,3,4,5]}`, 5},
		{`{"prompt":[[1,2],[3]]}`, 3},
		{`{"input":"abcdefgh"}`, 2},
		{`{"input":["a","b","c"]}`, 1},
	} {
		if got := simulator.EstimateTokens([]byte(tc.body)); got != tc.want {
			t.Errorf("EstimateTokens(%s) = %d, want %d", tc.body, got, tc.want)
		}
	}
}

func TestGeneratedText(t *testing.T) {
	if got := simulator.GeneratedText(3); got != "tok0 tok1 tok2" {
		t.Errorf("GeneratedText(3) = %q", got)
	}
	if got := simulator.GeneratedText(0); got != "" {
		t.Errorf("GeneratedText(0) = %q", got)
	}
	full := simulator.GeneratedText(simulator.MaxGeneratedTokens + 10)
	if n := len(strings.Fields(full)); n != simulator.MaxGeneratedTokens {
		t.Errorf("capped text has %d words", n)
	}
}
