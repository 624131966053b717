// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"strings"
	"testing"
)

func TestModelRewriterEvents(t *testing.T) {
	chunk := func(model string) string {
		return `data: {"id":"c1","object":"chat.Completion.chunk","created":1,"model":` + model + `,"choices":[{"index":0,"delta":{"content":"\"model\":\"x\""}}]}` + "\n\n"
	}
	for _, tc := range []struct{ name, in, want string }{
		{"chunk", chunk(`"qwen2.5-7b-instruct"`), chunk(`"chat-main"`)},
		{"no space after data", strings.Replace(chunk(`"q"`), "data: ", "data:", 1), strings.Replace(chunk(`"chat-main"`), "data: ", "data:", 1)},
		{"crlf and an event line", "event: message\r\n" + strings.TrimSuffix(chunk(`"q"`), "\n\n") + "\r\n\r\n", "event: message\r\n" + strings.TrimSuffix(chunk(`"chat-main"`), "\n\n") + "\r\n\r\n"},
		{"model after the choices", `data: {"choices":[{"delta":{"model":"inner"}}],"model":"q"}` + "\n\n", `data: {"choices":[{"delta":{"model":"inner"}}],"model":"chat-main"}` + "\n\n"},
		{"done", "data: [DONE]\n\n", "data: [DONE]\n\n"},
		{"comment", ": keep-alive\n\n", ": keep-alive\n\n"},
		{"no model", `data: {"error":{"message":"x"}}` + "\n\n", `data: {"error":{"message":"x"}}` + "\n\n"},
		{"model not a string", `data: {"model":null}` + "\n\n", `data: {"model":null}` + "\n\n"},
	} {
		m := &ModelRewriter{Alias: []byte(`"chat-main"`), SSE: true}
		var out bytes.Buffer
		if n, err := m.Pass(&out, []byte(tc.in)); err != nil || n != len(tc.in) || out.String() != tc.want {
			t.Errorf("%s: %d %v\n%s\nwant\n%s", tc.name, n, err, out.String(), tc.want)
		}
	}
}

// A JSON body is rewritten however the upstream's writes cut it.
func TestModelRewriterBody(t *testing.T) {
	body := `{"id":"chatcmpl-1","object":"chat.Completion","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5}}`
	want := strings.Replace(body, "gpt-4o-mini-2024-07-18", "chat-main", 1)
	late := `{"choices":[{"message":{"content":"` + strings.Repeat("word ", 2000) + `"}}],"model":"q"}`
	for _, tc := range []struct{ name, in, want string }{
		{"answer", body, want},
		{"model last", late, strings.Replace(late, `"model":"q"`, `"model":"chat-main"`, 1)},
		{"no model", `{"error":{"message":"bad"}}`, `{"error":{"message":"bad"}}`},
		{"not an object", `[1,2,3]`, `[1,2,3]`},
		{"cut short", body[:70], body[:70]},
		{"space before the object", " \n" + body, " \n" + want},
		{"embeddings: model after the data", `{"object":"list","data":[{"embedding":[` + strings.Repeat("0.125,", 3000) + `1]}],"model":"e5"}`, `{"object":"list","data":[{"embedding":[` + strings.Repeat("0.125,", 3000) + `1]}],"model":"chat-main"}`},
	} {
		for _, piece := range []int{1, 7, 64, 1 << 20} {
			m := &ModelRewriter{Alias: []byte(`"chat-main"`)}
			var out bytes.Buffer
			for s := tc.in; len(s) > 0; {
				k := min(piece, len(s))
				if n, err := m.Pass(&out, []byte(s[:k])); err != nil || n != k {
					t.Fatalf("%s/%d: wrote %d of %d: %v", tc.name, piece, n, k, err)
				}
				s = s[k:]
			}
			m.Finish(&out)
			if out.String() != tc.want {
				t.Errorf("%s/%d:\n%.200s\nwant\n%.200s", tc.name, piece, out.String(), tc.want)
			}
		}
	}
}

// The stream of a client that asked for usage passes on whole events, so
// that each can be rewritten, and nothing else changes.
func TestUsageScannerWholeEvents(t *testing.T) {
	stream := chunkRole + chunkTok + chunkUsage + chunkDone
	for _, piece := range []int{1, 7, 1 << 20} {
		u := &UsageScanner{SSE: true, Whole: true}
		var events []string
		w := writerFunc(func(p []byte) (int, error) {
			events = append(events, string(p))
			return len(p), nil
		})
		for s := stream; len(s) > 0; {
			k := min(piece, len(s))
			_, _ = u.Pass(w, []byte(s[:k]))
			s = s[k:]
		}
		u.Finish(w, false)
		if strings.Join(events, "|") != strings.Join([]string{chunkRole, chunkTok, chunkUsage, chunkDone}, "|") {
			t.Errorf("piece %d: events %q", piece, events)
		}
		if !u.Found || u.Prompt != 12 || u.Completion != 34 {
			t.Errorf("piece %d: usage %v %d %d", piece, u.Found, u.Prompt, u.Completion)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// BenchmarkModelRewriteChunk is the model rewrite of one stream chunk, to
// compare with the usage scan of one (BenchmarkUsageScannerChunk).
func BenchmarkModelRewriteChunk(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-7d3e9c","object":"chat.Completion.chunk","created":1730000000,"model":"qwen2.5-7b-instruct","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	m := &ModelRewriter{Alias: []byte(`"chat-main"`), SSE: true}
	var sink bytes.Buffer
	sink.Grow(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		sink.Reset()
		_, _ = m.Pass(&sink, chunk)
	}
}
