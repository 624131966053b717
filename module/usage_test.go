// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"strings"
	"testing"
)

const (
	chunkRole  = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\n\n"
	chunkTok   = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	chunkUsage = `data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}` + "\n\n"
	chunkDone  = "data: [DONE]\n\n"
)

// feed writes s through the scanner in pieces of n bytes.
func feed(u *usageScanner, s string, n int) string {
	var out bytes.Buffer
	for len(s) > 0 {
		k := min(n, len(s))
		_, _ = u.write(&out, []byte(s[:k]))
		s = s[k:]
	}
	u.finish(&out)
	return out.String()
}

func TestUsageScanner(t *testing.T) {
	stream := chunkRole + chunkTok + chunkTok + chunkUsage + chunkDone
	for _, piece := range []int{1, 7, 64, 1 << 20} {
		// the client asked for usage: passed through unchanged, counted
		u := &usageScanner{sse: true}
		if got := feed(u, stream, piece); got != stream {
			t.Errorf("piece %d: changed:\n%s", piece, got)
		}
		if !u.found || u.prompt != 12 || u.completion != 34 {
			t.Errorf("piece %d: usage %v %d %d", piece, u.found, u.prompt, u.completion)
		}

		// the gateway asked for it: counted, then removed
		u = &usageScanner{sse: true, strip: true}
		got := feed(u, stream, piece)
		want := strings.ReplaceAll(chunkRole+chunkTok+chunkTok+chunkDone, `,"usage":null`, "")
		if got != want {
			t.Errorf("piece %d: stripped stream\n%s\nwant\n%s", piece, got, want)
		}
		if !u.found || u.prompt != 12 || u.completion != 34 {
			t.Errorf("piece %d: stripped usage %v %d %d", piece, u.found, u.prompt, u.completion)
		}
	}

	body := `{"id":"x","object":"chat.completion","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
	u := &usageScanner{}
	if got := feed(u, body, 10); got != body || !u.found || u.prompt != 5 || u.completion != 7 {
		t.Errorf("json body: %v %d %d", u.found, u.prompt, u.completion)
	}
	// an unterminated last event of a stripped stream is not lost
	u = &usageScanner{sse: true, strip: true}
	if got := feed(u, chunkTok+"data: [DONE]", 5); !strings.HasSuffix(got, "data: [DONE]") {
		t.Errorf("tail lost: %q", got)
	}
}

func BenchmarkUsageScannerChunk(b *testing.B) {
	u := &usageScanner{sse: true, strip: true}
	chunk := []byte(chunkTok)
	var sink bytes.Buffer
	sink.Grow(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		sink.Reset()
		_, _ = u.write(&sink, chunk)
	}
}
