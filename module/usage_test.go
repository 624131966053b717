// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"strings"
	"testing"
	"time"
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

// Usage values that are not token counts are ignored and flagged, each on
// its own; valid ones beside them still count.
func TestUsageIgnoresBadNumbers(t *testing.T) {
	for _, tc := range []struct {
		usage              string
		found, bad         bool
		prompt, completion int64
	}{
		{`{"prompt_tokens":12,"completion_tokens":34}`, true, false, 12, 34},
		{`{"prompt_tokens":12.0,"completion_tokens":3e1}`, true, false, 12, 30},
		{`{"prompt_tokens":-5,"completion_tokens":1e12}`, false, true, 0, 0},
		{`{"prompt_tokens":-5,"completion_tokens":7}`, true, true, 0, 7},
		{`{"prompt_tokens":1.5,"completion_tokens":"7"}`, false, true, 0, 0},
		{`{"prompt_tokens":1000000001,"completion_tokens":null}`, false, true, 0, 0},
		{`{"prompt_tokens":9223372036854775807,"completion_tokens":{"n":1}}`, false, true, 0, 0},
		{`{"prompt_tokens":1e400,"completion_tokens":-0}`, true, true, 0, 0},
		{`{"prompt_tokens":3,"completion_tokens":null}`, true, false, 3, 0},
	} {
		for _, body := range []string{
			`{"id":"x","choices":[],"usage":` + tc.usage + `}`,
			`{"usage":` + tc.usage + `,"id":"x"}`, // not last: the slow path
		} {
			u := &usageScanner{}
			u.readUsageJSON([]byte(body))
			if u.found != tc.found || u.bad != tc.bad || u.prompt != tc.prompt || u.completion != tc.completion {
				t.Errorf("%s: found %v bad %v %d/%d, want %+v", body, u.found, u.bad, u.prompt, u.completion, tc)
			}
		}
	}
}

// Whatever numbers an upstream sends, reading them never panics, and what
// is counted is a whole number of tokens in [0, 1e9].
func FuzzReadUsage(f *testing.F) {
	for _, v := range []string{"12", "-5", "1e12", "12.5", "NaN", `"7"`, "null", "1e400", "-0", "0.0", "1000000000", "{}", "[1]", "9223372036854775808"} {
		f.Add(v, "3")
		f.Add("3", v)
	}
	f.Fuzz(func(t *testing.T, prompt, completion string) {
		for _, body := range []string{
			`{"choices":[],"usage":{"prompt_tokens":` + prompt + `,"completion_tokens":` + completion + `}}`,
			`data: {"usage":{"prompt_tokens":` + prompt + `,"completion_tokens":` + completion + "}}\n\n",
		} {
			u := &usageScanner{sse: strings.HasPrefix(body, "data:")}
			feed(u, body, 5)
			for _, n := range []int64{u.prompt, u.completion} {
				if n < 0 || n > 1e9 {
					t.Fatalf("%s: counted %d", body, n)
				}
			}
			if !u.found && (u.prompt != 0 || u.completion != 0) {
				t.Fatalf("%s: counts without usage", body)
			}
		}
	})
}

// The warning about bad numbers is written at most once a minute.
func TestWarnEvery(t *testing.T) {
	var w warnEvery
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {time.Second, false}, {59 * time.Second, false}, {time.Minute, true}, {90 * time.Second, false}, {3 * time.Minute, true}} {
		if got := w.allow(t0.Add(tc.after)); got != tc.want {
			t.Errorf("at +%v: %v", tc.after, got)
		}
	}
}
