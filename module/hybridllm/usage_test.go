// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	chunkRole  = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\n\n"
	chunkTok   = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	chunkStop  = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
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
	u.finish(&out, false)
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

// reframe ends every line of an SSE stream written with "\n" in eol.
func reframe(stream, eol string) string { return strings.ReplaceAll(stream, "\n", eol) }

// Every line ending the SSE spec allows, comments and multi-line data:
// the client gets each event as soon as it is whole, and the usage is
// read.
func TestUsageScannerFramings(t *testing.T) {
	const comment = ": keep-alive\n\n"
	const multiLine = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\n" +
		"data: \"choices\": [],\n" +
		"data: \"usage\": {\"prompt_tokens\": 12, \"completion_tokens\": 34}}\n\n"
	stream := comment + chunkRole + chunkTok + comment + chunkTok + chunkUsage + chunkDone
	stripped := strings.ReplaceAll(comment+chunkRole+chunkTok+comment+chunkTok+chunkDone, `,"usage":null`, "")
	for _, eol := range []string{"\n", "\r\n", "\r"} {
		for _, usage := range []string{chunkUsage, multiLine} {
			in := reframe(strings.Replace(stream, chunkUsage, usage, 1), eol)
			for _, piece := range []int{1, 2, 7, 64, 1 << 20} {
				u := &usageScanner{sse: true}
				if got := feed(u, in, piece); got != in {
					t.Errorf("%q piece %d: changed:\n%q", eol, piece, got)
				}
				if !u.found || u.prompt != 12 || u.completion != 34 {
					t.Errorf("%q piece %d: usage %v %d %d", eol, piece, u.found, u.prompt, u.completion)
				}
				u = &usageScanner{sse: true, strip: true}
				got := feed(u, in, piece)
				if want := reframe(stripped, eol); got != want {
					t.Errorf("%q piece %d: stripped stream\n%q\nwant\n%q", eol, piece, got, want)
				}
				if !u.found || u.prompt != 12 || u.completion != 34 {
					t.Errorf("%q piece %d: stripped usage %v %d %d", eol, piece, u.found, u.prompt, u.completion)
				}
			}
		}

		// event by event, as an upstream flushes them: each reaches the
		// client with its own write, none waits for the next
		u := &usageScanner{sse: true, strip: true}
		var out bytes.Buffer
		for _, ev := range []string{chunkRole, comment, chunkTok, chunkTok} {
			before := out.Len()
			_, _ = u.write(&out, []byte(reframe(ev, eol)))
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
		u := &usageScanner{sse: true, strip: true, wantFinish: true}
		feed(u, tc.stream, 5)
		if u.complete() != tc.whole {
			t.Errorf("complete = %v, want %v: %q", u.complete(), tc.whole, tc.stream)
		}
	}
	if u := (&usageScanner{sse: true}); !u.complete() {
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
			u := &usageScanner{sse: true, strip: !whole, whole: whole, wantFinish: true}
			var out bytes.Buffer
			if _, err := u.write(&out, []byte(chunkRole+tc.tail)); err != nil {
				t.Fatal(err)
			}
			u.finish(&out, tc.aborted)
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
		u := &usageScanner{sse: true, strip: true, wantFinish: true}
		var out bytes.Buffer
		s := in.String()
		for i := 0; len(s) > 0; i++ {
			k := min(len(s), 1+int(pick(i+int(size)))%max(int(size), 1))
			_, _ = u.write(&out, []byte(s[:k]))
			s = s[k:]
		}
		u.finish(&out, false)
		var got []string
		for ev := range strings.SplitSeq(normalizeEOL(out.String()), "\n\n") {
			if d := sseData([]byte(ev + "\n\n")); len(d) > 0 {
				got = append(got, string(d))
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("client saw\n%q\nwant\n%q\nfrom %q", got, want, in.String())
		}
		if !u.found || u.prompt != 12 || u.completion != 34 {
			t.Fatalf("usage %v %d %d", u.found, u.prompt, u.completion)
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

// Clouds report the prompt tokens served from their cache apart, and may
// bill them at their own price: read from a JSON answer and from a
// stream's usage chunk, and priced.
func TestCachedPromptTokens(t *testing.T) {
	body := `{"id":"x","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":800,"audio_tokens":0}}}`
	u := &usageScanner{}
	feed(u, body, 7)
	if u.prompt != 1000 || u.cached != 800 {
		t.Fatalf("json: prompt %d cached %d", u.prompt, u.cached)
	}
	chunk := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":800}}}\n\n"
	u = &usageScanner{sse: true}
	feed(u, chunkRole+chunk+chunkDone, 5)
	if u.cached != 800 {
		t.Fatalf("stream: cached %d", u.cached)
	}
	cc := &CostConfig{InputPerMillion: 2.5, CachedInputPerMillion: 1.25, OutputPerMillion: 10}
	if got, want := cc.requestCost(1000, 10, 800, 0), (200*2.5+800*1.25+10*10)/1e6; math.Abs(got-want) > 1e-15 {
		t.Errorf("cost %v, want %v", got, want)
	}
	// without a cached price, cached tokens are input tokens
	cc.CachedInputPerMillion = 0
	if got, want := cc.requestCost(1000, 10, 800, 0), (1000*2.5+10*10)/1e6; math.Abs(got-want) > 1e-15 {
		t.Errorf("cost without a cached price %v, want %v", got, want)
	}
}

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
			u := &usageScanner{sse: true, whole: true, wantFinish: true}
			out := feed(u, tc.in, n)
			if out != chunkTok || u.complete() || u.upstreamError != tc.msg || u.errored != (tc.msg != "") {
				t.Errorf("%s, %d-byte writes: passed on %q, complete %v, error %v %q", tc.name, n, out, u.complete(), u.errored, u.upstreamError)
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
			u := &usageScanner{}
			var out strings.Builder
			for i := 0; i < len(body); i += piece {
				if _, err := u.write(&out, []byte(body[i:min(i+piece, len(body))])); err != nil {
					t.Fatal(err)
				}
			}
			u.finish(&out, false)
			if !u.found || u.prompt != 40000 || u.completion != 0 {
				t.Errorf("%q in pieces of %d: usage %v %d %d", usage, piece, u.found, u.prompt, u.completion)
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
	long := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a longer piece of text"}}],"usage":null}` + "\n\n"
	tool := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}` + "\n\n"
	stream := chunkRole + chunkTok + long + tool + chunkTok
	for _, whole := range []bool{false, true} {
		u := &usageScanner{sse: true, whole: whole, wantFinish: true}
		var out strings.Builder
		if _, err := u.write(&out, []byte(stream)); err != nil {
			t.Fatal(err)
		}
		u.finish(&out, true)
		// the role chunk's content is empty: no text
		if u.textEvents != 4 || u.textBytes != 2+22+10+2 {
			t.Errorf("whole %v: %d events, %d bytes of text", whole, u.textEvents, u.textBytes)
		}
	}
}

// The Responses API's usage (input_tokens, output_tokens), in a JSON
// answer and in a stream's response.completed event, counts as the
// Chat API's does.
func TestResponsesUsage(t *testing.T) {
	body := `{"id":"resp_1","object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}],` +
		`"usage":{"input_tokens":4004,"input_tokens_details":{"cached_tokens":1000},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":4005}}`
	u := &usageScanner{}
	var out strings.Builder
	_, _ = u.write(&out, []byte(body))
	u.finish(&out, false)
	if !u.found || u.prompt != 4004 || u.completion != 1 || u.cached != 1000 {
		t.Errorf("JSON: usage %v %d %d %d", u.found, u.prompt, u.completion, u.cached)
	}
	stream := "event: response.output_text.delta\r\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\r\n\r\n" +
		"event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":12,\"output_tokens\":34,\"total_tokens\":46}}}\r\n\r\n"
	u = &usageScanner{sse: true}
	out.Reset()
	_, _ = u.write(&out, []byte(stream))
	u.finish(&out, false)
	if !u.found || u.prompt != 12 || u.completion != 34 || out.String() != stream {
		t.Errorf("stream: usage %v %d %d", u.found, u.prompt, u.completion)
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
			u := &usageScanner{}
			var out strings.Builder
			for i := 0; i < len(body); i += piece {
				_, _ = u.write(&out, []byte(body[i:min(i+piece, len(body))]))
			}
			u.finish(&out, false)
			if !u.found || u.prompt != 5001 || u.completion != 7 {
				t.Errorf("%s, pieces of %d: usage %v %d %d", name, piece, u.found, u.prompt, u.completion)
			}
		}
	}
}

func BenchmarkTally(b *testing.B) {
	u := &usageScanner{}
	event := []byte(strings.TrimSpace(chunkTok))
	b.ReportAllocs()
	for b.Loop() {
		u.tally(event)
	}
}
