// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"strings"
	"testing"
)

const (
	chunkRole  = `data: {"id":"c1","object":"chat.Completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\n\n"
	chunkTok   = `data: {"id":"c1","object":"chat.Completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	chunkStop  = `data: {"id":"c1","object":"chat.Completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	chunkUsage = `data: {"id":"c1","object":"chat.Completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}` + "\n\n"
	chunkDone  = "data: [DONE]\n\n"
)

// feed writes s through the scanner in pieces of n bytes.
func feed(u *UsageScanner, s string, n int) string {
	var out bytes.Buffer
	for len(s) > 0 {
		k := min(n, len(s))
		_, _ = u.Pass(&out, []byte(s[:k]))
		s = s[k:]
	}
	u.Finish(&out, false)
	return out.String()
}

func TestUsageScanner(t *testing.T) {
	stream := chunkRole + chunkTok + chunkTok + chunkUsage + chunkDone
	for _, piece := range []int{1, 7, 64, 1 << 20} {
		// the client asked for usage: passed through unchanged, counted
		u := &UsageScanner{SSE: true}
		if got := feed(u, stream, piece); got != stream {
			t.Errorf("piece %d: changed:\n%s", piece, got)
		}
		if !u.Found || u.Prompt != 12 || u.Completion != 34 {
			t.Errorf("piece %d: usage %v %d %d", piece, u.Found, u.Prompt, u.Completion)
		}

		// the gateway asked for it: counted, then removed
		u = &UsageScanner{SSE: true, Strip: true}
		got := feed(u, stream, piece)
		want := strings.ReplaceAll(chunkRole+chunkTok+chunkTok+chunkDone, `,"usage":null`, "")
		if got != want {
			t.Errorf("piece %d: stripped stream\n%s\nwant\n%s", piece, got, want)
		}
		if !u.Found || u.Prompt != 12 || u.Completion != 34 {
			t.Errorf("piece %d: stripped usage %v %d %d", piece, u.Found, u.Prompt, u.Completion)
		}
	}

	body := `{"id":"x","object":"chat.Completion","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
	u := &UsageScanner{}
	if got := feed(u, body, 10); got != body || !u.Found || u.Prompt != 5 || u.Completion != 7 {
		t.Errorf("json body: %v %d %d", u.Found, u.Prompt, u.Completion)
	}
	// an unterminated last event of a stripped stream is not lost
	u = &UsageScanner{SSE: true, Strip: true}
	if got := feed(u, chunkTok+"data: [DONE]", 5); !strings.HasSuffix(got, "data: [DONE]") {
		t.Errorf("tail lost: %q", got)
	}
}

func BenchmarkUsageScannerChunk(b *testing.B) {
	u := &UsageScanner{SSE: true, Strip: true}
	chunk := []byte(chunkTok)
	var sink bytes.Buffer
	sink.Grow(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		sink.Reset()
		_, _ = u.Pass(&sink, chunk)
	}
}

// reframe ends every line of an SSE stream written with "\n" in eol.
func reframe(stream, eol string) string { return strings.ReplaceAll(stream, "\n", eol) }

// Every line ending the SSE spec allows, comments and multi-line data:
// the client gets each event as soon as it is whole, and the usage is
// read.
func TestUsageScannerFramings(t *testing.T) {
	const comment = ": keep-alive\n\n"
	const multiLine = "data: {\"id\":\"c1\",\"object\":\"chat.Completion.chunk\",\n" +
		"data: \"choices\": [],\n" +
		"data: \"usage\": {\"prompt_tokens\": 12, \"completion_tokens\": 34}}\n\n"
	stream := comment + chunkRole + chunkTok + comment + chunkTok + chunkUsage + chunkDone
	stripped := strings.ReplaceAll(comment+chunkRole+chunkTok+comment+chunkTok+chunkDone, `,"usage":null`, "")
	for _, eol := range []string{"\n", "\r\n", "\r"} {
		for _, usage := range []string{chunkUsage, multiLine} {
			in := reframe(strings.Replace(stream, chunkUsage, usage, 1), eol)
			for _, piece := range []int{1, 2, 7, 64, 1 << 20} {
				u := &UsageScanner{SSE: true}
				if got := feed(u, in, piece); got != in {
					t.Errorf("%q piece %d: changed:\n%q", eol, piece, got)
				}
				if !u.Found || u.Prompt != 12 || u.Completion != 34 {
					t.Errorf("%q piece %d: usage %v %d %d", eol, piece, u.Found, u.Prompt, u.Completion)
				}
				u = &UsageScanner{SSE: true, Strip: true}
				got := feed(u, in, piece)
				if want := reframe(stripped, eol); got != want {
					t.Errorf("%q piece %d: stripped stream\n%q\nwant\n%q", eol, piece, got, want)
				}
				if !u.Found || u.Prompt != 12 || u.Completion != 34 {
					t.Errorf("%q piece %d: stripped usage %v %d %d", eol, piece, u.Found, u.Prompt, u.Completion)
				}
			}
		}

		// event by event, as an upstream flushes them: each reaches the
		// client with its own write, none waits for the next
		u := &UsageScanner{SSE: true, Strip: true}
		var out bytes.Buffer
		for _, ev := range []string{chunkRole, comment, chunkTok, chunkTok} {
			before := out.Len()
			_, _ = u.Pass(&out, []byte(reframe(ev, eol)))
			if out.Len() == before {
				t.Errorf("%q: event %q held back", eol, ev)
			}
		}
	}
}

// normalizeEOL reads every line ending as "\n".
func normalizeEOL(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// A (chat) completion stream is whole only with a chunk that carries a
// finish_reason; a null one does not count.
func TestUsageScannerFinish(t *testing.T) {
	finish := `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason": "stop"}]}` + "\n\n"
	for _, tc := range []struct {
		stream string
		whole  bool
	}{
		{chunkRole + chunkTok + chunkDone, false},
		{chunkRole + `data: {"choices":[{"delta":{},"finish_reason":null}]}` + "\n\n" + chunkDone, false},
		{chunkRole + chunkTok + finish + chunkUsage + chunkDone, true},
		{chunkRole + strings.TrimSuffix(finish, "\n\n"), true}, // no blank line at the end
	} {
		u := &UsageScanner{SSE: true, Strip: true, WantFinish: true}
		feed(u, tc.stream, 5)
		if u.Complete() != tc.whole {
			t.Errorf("complete = %v, want %v: %q", u.Complete(), tc.whole, tc.stream)
		}
	}
	if u := (&UsageScanner{SSE: true}); !u.Complete() {
		t.Error("a stream that is not a completion is complete as it ends")
	}
}

// A stream that broke off, or ended before its finish_reason, does not
// pass on its partial last event: the error event follows the last whole
// one, so that no client tries to decode half a chunk. A last event left
// unterminated by a clean end passes.
func TestUsageScannerDropsPartialEvent(t *testing.T) {
	partial := `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"ha`
	last := `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name, tail string
		aborted    bool
		want       string
	}{
		{"broke off", partial, true, ""},
		{"ended early", partial, false, ""},
		{"ended cleanly, unterminated", last, false, last},
	} {
		for _, whole := range []bool{false, true} {
			u := &UsageScanner{SSE: true, Strip: !whole, Whole: whole, WantFinish: true}
			var out bytes.Buffer
			if _, err := u.Pass(&out, []byte(chunkRole+tc.tail)); err != nil {
				t.Fatal(err)
			}
			u.Finish(&out, tc.aborted)
			want := strings.ReplaceAll(chunkRole, `,"usage":null`, "")
			if whole {
				want = chunkRole
			}
			if got := out.String(); got != want+tc.want {
				t.Errorf("%s (whole %v): the client got %q", tc.name, whole, got)
			}
		}
	}
}

func TestSSEData(t *testing.T) {
	for in, want := range map[string]string{
		"data: x\n\n":                "x",
		"data:x\r\n\r\n":             "x",
		": c\nevent: m\ndata: a\n\n": "a",
		"data: a\rdata: b\r\r":       "a\nb",
		"database: no\n\n":           "",
		"data\ndata: b\n\n":          "\nb",
	} {
		if got := string(sseData([]byte(in))); got != want {
			t.Errorf("sseData(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzUsageScannerFraming frames a stream with line endings and cuts it
// into writes as the input says: the client sees the upstream's events
// (without the usage the gateway asked for), and the usage is read.
func FuzzUsageScannerFraming(f *testing.F) {
	f.Add([]byte{0}, uint8(3))
	f.Add([]byte{1, 2, 0, 1}, uint8(1))
	f.Add([]byte{2, 2, 2}, uint8(200))
	f.Fuzz(func(t *testing.T, choices []byte, size uint8) {
		pick := func(i int) byte {
			if len(choices) == 0 {
				return 0
			}
			return choices[i%len(choices)]
		}
		events := []string{chunkRole, chunkTok, ": keep-alive\n\n", chunkTok, chunkStop, chunkUsage, chunkDone}
		var in strings.Builder
		var want []string
		n := 0
		for _, ev := range events {
			lines := strings.SplitAfter(ev, "\n")
			for _, l := range lines {
				if l == "" {
					continue
				}
				in.WriteString(strings.TrimSuffix(l, "\n"))
				eol := []string{"\n", "\r\n", "\r"}[pick(n)%3]
				if eol == "\n" && strings.HasSuffix(in.String(), "\r") {
					eol = "\r" // after a "\r", a "\n" would be its second half
				}
				in.WriteString(eol)
				n++
			}
			if d := sseData([]byte(ev)); len(d) > 0 && ev != chunkUsage {
				want = append(want, strings.ReplaceAll(string(d), `,"usage":null`, ""))
			}
		}
		u := &UsageScanner{SSE: true, Strip: true, WantFinish: true}
		var out bytes.Buffer
		s := in.String()
		for i := 0; len(s) > 0; i++ {
			k := min(len(s), 1+int(pick(i+int(size)))%max(int(size), 1))
			_, _ = u.Pass(&out, []byte(s[:k]))
			s = s[k:]
		}
		u.Finish(&out, false)
		var got []string
		for ev := range strings.SplitSeq(normalizeEOL(out.String()), "\n\n") {
			if d := sseData([]byte(ev + "\n\n")); len(d) > 0 {
				got = append(got, string(d))
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("client saw\n%q\nwant\n%q\nfrom %q", got, want, in.String())
		}
		if !u.Found || u.Prompt != 12 || u.Completion != 34 {
			t.Fatalf("usage %v %d %d", u.Found, u.Prompt, u.Completion)
		}
	})
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
			u := &UsageScanner{}
			u.readUsageJSON([]byte(body))
			if u.Found != tc.found || u.Bad != tc.bad || u.Prompt != tc.prompt || u.Completion != tc.completion {
				t.Errorf("%s: found %v bad %v %d/%d, want %+v", body, u.Found, u.Bad, u.Prompt, u.Completion, tc)
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
			u := &UsageScanner{SSE: strings.HasPrefix(body, "data:")}
			feed(u, body, 5)
			for _, n := range []int64{u.Prompt, u.Completion} {
				if n < 0 || n > 1e9 {
					t.Fatalf("%s: counted %d", body, n)
				}
			}
			if !u.Found && (u.Prompt != 0 || u.Completion != 0) {
				t.Fatalf("%s: counts without usage", body)
			}
		}
	})
}

// The warning about bad numbers is written at most once a minute.
// Clouds report the prompt tokens served from their cache apart, and may
// bill them at their own price: read from a JSON answer and from a
// stream's usage chunk, and priced.
// A completion stream that ends before its finish_reason, on an error event
// of the upstream's or a [DONE]: neither is passed on (the gateway's own
// event ends the stream), and the error's message is kept, also when the
// stream closed before the event's blank line.
func TestUsageScannerHoldsBackAnEarlyEnd(t *testing.T) {
	const errEvent = `data: {"error":{"message":"engine dead","type":"InternalServerError","param":null,"code":500}}`
	for _, tc := range []struct{ name, in, msg string }{
		{"error, then [DONE]", chunkTok + errEvent + "\n\n" + chunkDone, "engine dead"},
		{"an error the stream did not end", chunkTok + errEvent, "engine dead"},
		{"[DONE] alone", chunkTok + chunkDone, ""},
	} {
		for _, n := range []int{1, 7, 4096} {
			u := &UsageScanner{SSE: true, Whole: true, WantFinish: true}
			out := feed(u, tc.in, n)
			if out != chunkTok || u.Complete() || u.UpstreamError != tc.msg || u.Errored != (tc.msg != "") {
				t.Errorf("%s, %d-byte writes: passed on %q, complete %v, error %v %q", tc.name, n, out, u.Complete(), u.Errored, u.UpstreamError)
			}
		}
	}
}

// The usage of a JSON answer far larger than what is kept whole (the
// embeddings of many inputs) is read from its tail, whatever the pieces
// it comes in and the spacing of the usage object.
func TestUsageOfALargeJSONBody(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"object":"list","data":[`)
	for i := 0; sb.Len() < 3*maxUsageBody; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"object":"embedding","index":0,"embedding":[0.0123,-0.0456,0.0789,0.0111]}`)
	}
	for _, usage := range []string{`"usage":{"prompt_tokens":40000,"total_tokens":40000}`, `"usage" : { "prompt_tokens" : 40000 , "total_tokens":40000}`} {
		body := sb.String() + `],"model":"e5",` + usage + `}`
		for _, piece := range []int{1000, 64 << 10, 200 << 10} {
			u := &UsageScanner{}
			var out strings.Builder
			for i := 0; i < len(body); i += piece {
				if _, err := u.Pass(&out, []byte(body[i:min(i+piece, len(body))])); err != nil {
					t.Fatal(err)
				}
			}
			u.Finish(&out, false)
			if !u.Found || u.Prompt != 40000 || u.Completion != 0 {
				t.Errorf("%q in pieces of %d: usage %v %d %d", usage, piece, u.Found, u.Prompt, u.Completion)
			}
			if out.String() != body {
				t.Errorf("pieces of %d: the body changed on its way", piece)
			}
		}
	}
}

// A stream's text passed on is tallied: the events that carried text,
// and its bytes, for an estimate when no usage comes.
func TestStreamTextTally(t *testing.T) {
	long := `data: {"id":"c1","object":"chat.Completion.chunk","choices":[{"index":0,"delta":{"content":"a longer piece of text"}}],"usage":null}` + "\n\n"
	tool := `data: {"id":"c1","object":"chat.Completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}` + "\n\n"
	stream := chunkRole + chunkTok + long + tool + chunkTok
	for _, whole := range []bool{false, true} {
		u := &UsageScanner{SSE: true, Whole: whole, WantFinish: true}
		var out strings.Builder
		if _, err := u.Pass(&out, []byte(stream)); err != nil {
			t.Fatal(err)
		}
		u.Finish(&out, true)
		// the role chunk's content is empty: no text
		if u.TextEvents != 4 || u.TextBytes != 2+22+10+2 {
			t.Errorf("whole %v: %d events, %d bytes of text", whole, u.TextEvents, u.TextBytes)
		}
	}
}

// The Responses API's usage (input_tokens, output_tokens), in a JSON
// answer and in a stream's response.completed event, counts as the
// Chat API's does.
func TestResponsesUsage(t *testing.T) {
	body := `{"id":"resp_1","object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],` +
		`"usage":{"input_tokens":4004,"input_tokens_details":{"cached_tokens":1000},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":4005}}`
	u := &UsageScanner{}
	var out strings.Builder
	_, _ = u.Pass(&out, []byte(body))
	u.Finish(&out, false)
	if !u.Found || u.Prompt != 4004 || u.Completion != 1 || u.Cached != 1000 {
		t.Errorf("JSON: usage %v %d %d %d", u.Found, u.Prompt, u.Completion, u.Cached)
	}
	stream := "event: response.output_text.delta\r\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\r\n\r\n" +
		"event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":12,\"output_tokens\":34,\"total_tokens\":46}}}\r\n\r\n"
	u = &UsageScanner{SSE: true}
	out.Reset()
	_, _ = u.Pass(&out, []byte(stream))
	u.Finish(&out, false)
	if !u.Found || u.Prompt != 12 || u.Completion != 34 || out.String() != stream {
		t.Errorf("stream: usage %v %d %d", u.Found, u.Prompt, u.Completion)
	}
}

// Of a JSON answer too large to keep, a usage object anywhere is read as
// it passes: before a long tail (vLLM's prompt_logprobs come after the
// usage), or first.
func TestUsageAnywhereInALargeBody(t *testing.T) {
	filler := strings.Repeat(`{"12":{"logprob":-1.25,"rank":1,"decoded_token":"ab"}},`, 3*maxUsageBody/56)
	usage := `"usage":{"prompt_tokens":5001,"completion_tokens":7,"total_tokens":5008}`
	for name, body := range map[string]string{
		"before the prompt_logprobs": `{"id":"c","choices":[{"message":{"content":"` + strings.Repeat("long answer ", 10<<10) + `"}}],` + usage + `,"prompt_logprobs":[null,` + filler + `null]}`,
		"first":                      `{` + usage + `,"data":[` + filler + `null]}`,
	} {
		for _, piece := range []int{777, 32 << 10, 300 << 10} {
			u := &UsageScanner{}
			var out strings.Builder
			for i := 0; i < len(body); i += piece {
				_, _ = u.Pass(&out, []byte(body[i:min(i+piece, len(body))]))
			}
			u.Finish(&out, false)
			if !u.Found || u.Prompt != 5001 || u.Completion != 7 {
				t.Errorf("%s, pieces of %d: usage %v %d %d", name, piece, u.Found, u.Prompt, u.Completion)
			}
		}
	}
}

func BenchmarkTally(b *testing.B) {
	u := &UsageScanner{}
	event := []byte(strings.TrimSpace(chunkTok))
	b.ReportAllocs()
	for b.Loop() {
		u.tally(event)
	}
}

// BenchmarkUsageJSON reads the usage of a non-streamed answer.
func BenchmarkUsageJSON(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"qwen","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("word ", 200) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":200,"total_tokens":212}}`)
	var sink discard
	u := &UsageScanner{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		u.buf, u.Found = u.buf[:0], false
		_, _ = u.Pass(sink, body)
		u.readUsageJSON(u.buf)
		if !u.Found {
			b.Fatal("no usage")
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// The prompt tokens the provider served from its cache are read, of a
// JSON answer and of a stream.
func TestCachedPromptTokens(t *testing.T) {
	body := `{"id":"x","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":800,"audio_tokens":0}}}`
	u := &UsageScanner{}
	feed(u, body, 7)
	if u.Prompt != 1000 || u.Cached != 800 {
		t.Fatalf("json: prompt %d cached %d", u.Prompt, u.Cached)
	}
	chunk := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":800}}}\n\n"
	u = &UsageScanner{SSE: true}
	feed(u, chunkRole+chunk+chunkDone, 5)
	if u.Cached != 800 {
		t.Fatalf("stream: cached %d", u.Cached)
	}
}

// Each class of token an upstream tells is read: OpenAI's reasoning
// tokens (chat, and the Responses API's output details), Anthropic's
// cache reads and writes, in a JSON answer and in a stream; a spaced
// usage object too.
func TestTokenClasses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		u      UsageScanner
		in     string
		prompt int64
		cached int64
		write  int64
		reason int64
	}{
		{"chat reasoning", UsageScanner{}, `{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":30,"accepted_prediction_tokens":0}}}`,
			100, 64, 0, 30},
		{"chat reasoning, spaced", UsageScanner{}, `{"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 50, "completion_tokens_details": {"reasoning_tokens": 30}}}`,
			100, 0, 0, 30},
		{"responses", UsageScanner{}, `{"object":"response","output":[],"usage":{"input_tokens":90,"input_tokens_details":{"cached_tokens":10},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":25},"total_tokens":130}}`,
			90, 10, 0, 25},
		{"a stream's reasoning", UsageScanner{SSE: true}, chunkRole + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":9,\"completion_tokens_details\":{\"reasoning_tokens\":4}}}\n\n" + chunkDone,
			7, 0, 0, 4},
		{"anthropic cache", UsageScanner{Events: EventsAnthropic}, `{"type":"message","content":[],"usage":{"input_tokens":20,"cache_creation_input_tokens":1500,"cache_read_input_tokens":8000,"output_tokens":200}}`,
			9520, 8000, 1500, 0},
		{"anthropic stream", UsageScanner{SSE: true, Events: EventsAnthropic},
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":1500,\"cache_read_input_tokens\":8000,\"output_tokens\":1}}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":200}}\n\n",
			9520, 8000, 1500, 0},
	} {
		u := tc.u
		feed(&u, tc.in, 6)
		if !u.Found || u.Prompt != tc.prompt || u.Cached != tc.cached || u.CacheWrite != tc.write || u.Reasoning != tc.reason || u.Bad {
			t.Errorf("%s: %+v", tc.name, u.Usage)
		}
	}
}
