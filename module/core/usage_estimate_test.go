// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// Each image, audio clip or file of a prompt counts mediaPartTokens in
// its estimate, in the chat completions, Responses and Anthropic
// Messages shapes, nested in a tool result too; its bytes do when they
// are more.
func TestPromptEstimateCountsMedia(t *testing.T) {
	const question = `{"type":"text","text":"What is in these?"}` // 17 bytes of text: 5 tokens
	data := strings.Repeat("A", 40000)                            // 10,000 tokens of base64
	for _, tc := range []struct {
		body string
		want int64
	}{
		{`{"messages":[{"role":"user","content":[` + question + `]}]}`, 18}, // its 72 bytes of JSON
		{`{"messages":[{"role":"user","content":[` + question + `,{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`, 1005},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},` +
			`{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}},{"type":"file","file":{"file_id":"f"}}]}]}`, 3000},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + data + `"}}]}]}`,
			10024}, // the bytes are more
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"What is in these?"},{"type":"input_image","image_url":"https://x/a.png"},` +
			`{"type":"input_file","file_id":"f"}]}]}`, 2005},
		{`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}},` +
			`{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]},{"role":"user","content":[` +
			`{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","data":"iVBO"}}]}]}]}`, 3000},
		// not media: a text part named so, a type that is not a part's
		{`{"messages":[{"role":"user","content":[{"type":"image_url","text":"` + strings.Repeat("x", 400) + `"}]},` +
			`{"role":"user","content":"image_url"}]}`, 125},
	} {
		b := []byte(tc.body)
		q := new(routing.Asked)
		var ok bool
		if q.Top, ok = protocol.Scan(b); !ok {
			t.Fatalf("invalid test body %s", b)
		}
		q.Features = routing.NewFeatures(b, nil, &q.Top)
		if got := (&routing.TokenBounds{Asked: q}).PromptEstimate(); got != tc.want {
			t.Errorf("%.200s: %d tokens, want %d", b, got, tc.want)
		}
	}
}

// Counting media allocates nothing.
func TestPromptEstimateAllocations(t *testing.T) {
	b := []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"What is in this?"},` +
		`{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}],"input":[{"content":[{"type":"input_image"}]}]}`)
	top, _ := protocol.Scan(b)
	if n := testing.AllocsPerRun(100, func() {
		f := routing.NewFeatures(b, nil, &top)
		f.PromptWithMedia()
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
