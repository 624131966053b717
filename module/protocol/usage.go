// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"io"
	"sync"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/tidwall/gjson"
)

// maxUsageBody is the largest non-streamed response body kept whole to
// read its usage. Of a larger one (the embeddings of many inputs, vLLM's
// prompt_logprobs) each usage object is read as it passes, through a
// window of the last usageTail bytes.
const (
	maxUsageBody = 1 << 20
	usageTail    = 64 << 10
)

// UsageScanner follows a response body on its way to the client and reads
// the token usage from it: from a JSON body's usage object, or from the
// usage chunk at the end of an SSE stream, whatever its framing (see
// sseEvents). When the gateway asked the upstream for stream usage on the
// client's behalf (strip), it removes what the client did not ask for:
// the usage-only chunk and the "usage":null field of the other chunks.
// With wantFinish it also notes whether a chunk carried a finish_reason,
// which tells a (chat) completion stream that ended from one cut short.
type UsageScanner struct {
	SSE        bool
	Events     Events // the answer's API's (see API.Events)
	Strip      bool
	Whole      bool // pass a stream on whole events at a time (strip does too)
	WantFinish bool
	Errored    bool // see UpstreamError
	Full       bool // a JSON body outgrew maxUsageBody: its tail is kept
	// the upstream ended the stream before its finish_reason with an
	// error event, whose message this is; the event is not passed on (the
	// gateway sends its own), nor the [DONE] after it
	UpstreamError string
	at            scanAt
	buf           []byte  // the JSON body so far, or the current partial SSE event
	pooled        *[]byte // buf's holder from usageBufs, if any
	tail          []byte  // the last bytes of a JSON body that outgrew maxUsageBody

	Passed // what was passed on
	Usage  // the answer's usage, as read
}

// scanAt is where a scan of a stream is.
type scanAt struct {
	finished bool // an event said the answer is whole (a finish_reason, a message_stop)
	cr       bool // the last event ended in "\r" at the end of the bytes so far
	dropped  bool // the last event was not passed on
	start    bool // the event read is a message_start
	// an Anthropic answer's input counts so far: message_start gives
	// them, a message_delta may again
	input, cacheRead, cacheWrite int64
}

// Passed is what an answer passed on, for an estimate when no usage
// comes: the bytes of a JSON body, and of a stream the events that
// carried text and the bytes of that text.
type Passed struct {
	Size                  int64
	TextEvents, TextBytes int64
}

// Usage is an answer's usage, as read.
type Usage struct {
	Prompt, Completion int64
	Cached             int64 // prompt tokens the provider served from its cache
	CacheWrite         int64 // prompt tokens it wrote to its cache (Anthropic's cache_creation_input_tokens)
	Reasoning          int64 // completion tokens the model spent reasoning
	Found              bool
	Bad                bool // the upstream sent a usage value that is no count
	// the prompt's counts came and the answer's did not (an Anthropic
	// stream cut before its message_delta): Prompt and Cached hold
	Partial bool
}

var (
	usageKey  = []byte(`"usage":{`)
	usageNull = []byte(`,"usage":null`)
)

// usageBufs recycles the scanners' buffers: most bodies and partial
// events are small, and a request would otherwise allocate one.
var usageBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf is the largest buffer put back for reuse.
const maxPooledBuf = 64 << 10

// grow appends p to the buffer, taking one from the pool first.
func (u *UsageScanner) grow(p []byte) {
	if u.buf == nil {
		u.pooled = usageBufs.Get().(*[]byte)
		u.buf = (*u.pooled)[:0]
	}
	u.buf = append(u.buf, p...)
}

// release puts the buffer back; the scanner must not be written to after.
func (u *UsageScanner) Release() {
	if u.pooled != nil && cap(u.buf) <= maxPooledBuf {
		*u.pooled = u.buf[:0]
		usageBufs.Put(u.pooled)
	}
	u.pooled, u.buf = nil, nil
}

// write passes p on to w (for a stream whose extra chunk is stripped, or
// with whole set, whole events at a time) and reports the bytes it wrote
// to w.
func (u *UsageScanner) Pass(w io.Writer, p []byte) (int, error) {
	if !u.SSE {
		u.Size += int64(len(p))
		switch {
		case u.Full:
			u.keepTail(p)
		case len(u.buf)+len(p) > maxUsageBody:
			u.Full = true
			u.tail = make([]byte, 0, 2*usageTail)
			u.keepTail(u.buf)
			u.keepTail(p)
			u.Release()
		default:
			u.grow(p)
		}
		return w.Write(p)
	}
	if !u.Strip && !u.Whole {
		u.scanEvents(p, nil)
		return w.Write(p)
	}
	return u.scanEvents(p, w)
}

// keepTail passes a large JSON body's bytes through the window of its
// last usageTail bytes, half a window at a time, and reads each usage
// object whose key leaves the window: the object is whole in it, since
// half a window follows the key.
func (u *UsageScanner) keepTail(p []byte) {
	for len(p) > usageTail/2 {
		u.keepTail(p[:usageTail/2])
		p = p[usageTail/2:]
	}
	if len(u.tail)+len(p) > cap(u.tail) {
		drop := len(u.tail) - (usageTail - len(p))
		for i := 0; i < drop; {
			v, next := jsonValueAt(u.tail, usageName, i)
			if v < 0 || next-len(usageName) >= drop {
				break
			}
			if v < len(u.tail) && u.tail[v] == '{' {
				u.usageObject(u.tail, v)
			}
			i = next
		}
		n := copy(u.tail, u.tail[drop:])
		u.tail = u.tail[:n]
	}
	u.tail = append(u.tail, p...)
}

// scanEvents appends p to the partial event and handles each complete
// event (see event). Without w the bytes were already passed on. The
// buffer is reused: the partial event moves to its front.
func (u *UsageScanner) scanEvents(p []byte, w io.Writer) (int, error) {
	u.grow(p)
	written := 0
	var err error
	events := newSSEEvents(u.buf)
	if u.at.cr && len(u.buf) > 0 && u.buf[0] == '\n' {
		// the second half of the "\r\n" that ended the last event
		events.pos = 1
		if w != nil && !u.at.dropped {
			written, err = w.Write(u.buf[:1])
		}
	}
	u.at.cr = false
	for err == nil {
		event, ok := events.next()
		if !ok {
			break
		}
		var n int
		n, err = u.event(event, w)
		written += n
		if events.pos == len(u.buf) {
			u.at.cr = event[len(event)-1] == '\r'
		}
	}
	n := copy(u.buf, u.buf[events.pos:])
	u.buf = u.buf[:n]
	if len(u.buf) > maxUsageBody {
		// no event boundary in sight: not an event stream after all
		if w != nil {
			n, err = w.Write(u.buf)
			written += n
		}
		u.buf = u.buf[:0]
	}
	return written, err
}

// event reads the usage and the finish of one event and, when w is not
// nil, writes it to w, stripped.
func (u *UsageScanner) event(event []byte, w io.Writer) (int, error) {
	u.at.dropped = false
	if u.WantFinish && !u.at.finished {
		u.at.finished = u.finishes(event)
		if !u.at.finished {
			// an end before the finish is a cut: the client gets the
			// gateway's error event as the stream's last (see
			// midStreamFailure), never the upstream's own, nor one after
			// [DONE]; without w (a last event the stream did not end)
			// only what it says is kept
			switch end, msg := endOf(event); end {
			case streamError:
				u.Errored, u.UpstreamError = true, msg
				u.at.dropped = w != nil
				return 0, nil
			case streamDone:
				u.at.dropped = w != nil
				return 0, nil
			}
		}
	}
	if hasValue(event, usageName, '{') {
		u.readUsage(event)
		if u.Strip && w != nil && emptyChoices(event) {
			u.at.dropped = true
			return 0, nil // the usage-only chunk the client did not ask for
		}
	}
	if w == nil {
		if !u.Strip && !u.Whole {
			u.tally(event) // passed on as it came
		}
		return 0, nil
	}
	if u.Strip {
		event = stripAll(event, usageNull)
	}
	u.tally(event)
	return w.Write(event)
}

// tally counts the text of an event passed on to the client: the bytes
// of its text values (see isTextKey), and the event if it had any. One
// pass from colon to colon: a string value is skipped whole (colons in it
// are text), its key compared only then.
func (u *UsageScanner) tally(event []byte) {
	n := int64(0)
	for i := 0; i < len(event); {
		k := bytes.IndexByte(event[i:], ':')
		if k < 0 {
			break
		}
		colon := i + k
		v := colon + 1
		if v < len(event) && event[v] != '"' {
			v = jsonscan.SkipSpace(event, v)
		}
		if v >= len(event) || event[v] != '"' {
			i = colon + 1
			continue
		}
		end, _, ok := jsonscan.ScanString(event, v+1)
		if !ok {
			break
		}
		if isTextKey(event[:colon]) {
			n += int64(end - v - 2)
		}
		i = end
	}
	if n > 0 {
		u.TextEvents++
		u.TextBytes += n
	}
}

// isTextKey reports whether b ends with the key of a field whose string
// value is generated text, in the chunks of the chat, completions and
// responses streams and the events of Anthropic's: content, text,
// reasoning and thinking, a tool call's arguments (partial_json), a
// refusal, a responses delta.
func isTextKey(b []byte) bool {
	j := len(b) - 1
	for j >= 0 && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r' || b[j] == '\n') {
		j--
	}
	if j < 0 || b[j] != '"' {
		return false
	}
	start := bytes.LastIndexByte(b[:j], '"')
	if start < 0 {
		return false
	}
	switch string(b[start+1 : j]) {
	case "content", "text", "reasoning_content", "reasoning", "arguments", "refusal", "delta", "thinking", "partial_json":
		return true
	}
	return false
}

// finishes reports whether an event says the answer is whole: a chunk's
// finish_reason that is not null, Anthropic's message_stop.
func (u *UsageScanner) finishes(event []byte) bool {
	switch u.Events {
	case EventsAnthropic:
		return eventType(event) == messageStop
	case EventsResponses:
		// the stream's last event: a failure it tells itself too, which
		// the client reads as the API's own
		switch eventType(event) {
		case "response.completed", "response.incomplete", "response.failed", "error":
			return true
		}
		return false
	}
	return hasValue(event, finishReasonName, '"')
}

// complete reports whether the body ended as it should: a (chat)
// completion stream with a chunk that carried a finish_reason, an
// Anthropic stream with its message_stop.
func (u *UsageScanner) Complete() bool {
	return !u.WantFinish || u.at.finished
}

// finish handles what is left of a stream (an unterminated last event)
// and, for a JSON body, reads its usage. It releases the buffer. The
// partial event of a stream that broke off (aborted), or that ended
// before its finish_reason, is not passed on: the client gets the error
// event after the last whole one.
func (u *UsageScanner) Finish(w io.Writer, aborted bool) {
	switch {
	case u.SSE:
		if len(u.buf) > 0 {
			if !u.Strip && !u.Whole {
				w = nil // already passed on
			}
			if aborted || (u.WantFinish && !u.at.finished && !u.finishes(u.buf)) {
				w = nil
			}
			_, _ = u.event(u.buf, w)
		}
	case u.Full:
		u.readUsageAt(u.tail) // the last one, if any is left in the window
		u.tail = nil
	case len(u.buf) > 0:
		u.readUsageJSON(u.buf)
		if !u.Found {
			u.tally(u.buf) // the answer's text, for an estimate
		}
	}
	u.Release()
}

// readUsageAt reads the last usage object that lies whole in part of a
// JSON body, whatever the spacing around its colon; it reports whether
// it found counts there.
func (u *UsageScanner) readUsageAt(part []byte) bool {
	last := -1 // the last one: the top level's, in the OpenAI shape
	for i := 0; i < len(part); {
		v, next := jsonValueAt(part, usageName, i)
		if v < 0 {
			break
		}
		if v < len(part) && part[v] == '{' {
			last = v
		}
		i = next
	}
	return last >= 0 && u.usageObject(part, last)
}

// readUsage reads the usage of one SSE event.
func (u *UsageScanner) readUsage(event []byte) {
	if u.Events == EventsAnthropic {
		u.at.start = eventType(event) == "message_start"
	}
	if data := sseData(event); len(data) > 0 {
		u.readUsageJSON(bytes.TrimSpace(data))
	}
}

func (u *UsageScanner) readUsageJSON(body []byte) {
	// the usage object comes last in OpenAI-style bodies: read it alone
	// rather than walking the whole answer
	if i := bytes.LastIndex(body, usageKey); i >= 0 && u.usageObject(body, i+len(usageKey)-1) {
		return
	}
	if u.Events == EventsAnthropic {
		// spaced ("usage": {), or in message_start's message: the last
		// usage object wherever it is, read by Anthropic's rules
		u.readUsageAt(body)
		return
	}
	r := gjson.GetManyBytes(body, "usage.prompt_tokens", "usage.completion_tokens", "usage.prompt_tokens_details.cached_tokens",
		"usage.completion_tokens_details.reasoning_tokens",
		"usage.input_tokens", "usage.output_tokens", "usage.input_tokens_details.cached_tokens", "usage.output_tokens_details.reasoning_tokens")
	switch {
	case r[0].Exists() || r[1].Exists():
		u.setUsage(rawBytes(r[0]), rawBytes(r[1]), rawBytes(r[2]), rawBytes(r[3]))
	case r[4].Exists() || r[5].Exists():
		u.setUsage(rawBytes(r[4]), rawBytes(r[5]), rawBytes(r[6]), rawBytes(r[7]))
	}
}

// usageObject reads the usage object at body[i]; it reports whether the
// object is whole and has counts.
func (u *UsageScanner) usageObject(body []byte, i int) bool {
	// the Chat and Completions APIs' names, or the Responses API's (and
	// Anthropic's) input_tokens and output_tokens
	var prompt, completion, details, outDetails, cacheRead, cacheWrite []byte
	_, ok := jsonscan.ObjectFields(body, i, 4, func(key, raw []byte, _ int) {
		switch string(key) {
		case "prompt_tokens", "input_tokens":
			prompt = raw
		case "completion_tokens", "output_tokens":
			completion = raw
		case "prompt_tokens_details", "input_tokens_details":
			details = raw
		case "completion_tokens_details", "output_tokens_details":
			outDetails = raw
		case "cache_read_input_tokens":
			cacheRead = raw
		case "cache_creation_input_tokens":
			cacheWrite = raw
		}
	})
	if !ok || prompt == nil && completion == nil {
		return false
	}
	if u.Events == EventsAnthropic {
		u.anthropicUsage(prompt, completion, cacheRead, cacheWrite)
		return true
	}
	u.setUsage(prompt, completion, detail(details, "cached_tokens"), detail(outDetails, "reasoning_tokens"))
	return true
}

// detail is the raw value of a field of a usage details object (nil when
// either is absent).
func detail(details []byte, field string) []byte {
	var v []byte
	if len(details) > 0 {
		jsonscan.ObjectFields(details, 0, 1, func(key, raw []byte, _ int) {
			if string(key) == field {
				v = raw
			}
		})
	}
	return v
}

// setUsage records the usage counts read from the upstream (the prompt,
// the completion, the cached prompt and the reasoning among the
// completion), as raw JSON values (nil when absent). A value that is not a count (negative,
// fractional, absurd, not a number) is ignored and flagged; the last
// valid usage seen wins (continuous usage stats repeat it).
func (u *UsageScanner) setUsage(prompt, completion, cached, reasoning []byte) {
	p, pok := upstreamCount(prompt)
	c, cok := upstreamCount(completion)
	k, kok := upstreamCount(cached)
	r, rok := upstreamCount(reasoning)
	if !pok && !absentValue(prompt) || !cok && !absentValue(completion) || !kok && !absentValue(cached) || !rok && !absentValue(reasoning) {
		u.Bad = true
	}
	if pok || cok {
		u.Prompt, u.Completion, u.Cached, u.Reasoning, u.Found = p, c, min(k, p), min(r, c), true
	}
}

// anthropicUsage records the counts of an Anthropic usage object, as raw
// JSON values (nil when absent): its input_tokens leave out the cached
// prompt, read (cache_read_input_tokens) or written
// (cache_creation_input_tokens), which the prompt counts here as
// OpenAI's prompt_tokens do. A stream gives them in parts: the input in
// message_start, the output, a running total, in each message_delta,
// which may give the input again; a count given again replaces the last,
// one not given stays.
func (u *UsageScanner) anthropicUsage(input, output, cacheRead, cacheWrite []byte) {
	a := &u.at
	if a.start {
		// the output counted so far (0 or 1): the answer's is to come
		output = nil
	}
	for _, c := range [...]struct {
		raw []byte
		to  *int64
	}{{input, &a.input}, {output, &u.Completion}, {cacheRead, &a.cacheRead}, {cacheWrite, &a.cacheWrite}} {
		if n, ok := upstreamCount(c.raw); ok {
			*c.to = n
		} else if !absentValue(c.raw) {
			u.Bad = true
		}
	}
	u.Prompt, u.Cached, u.CacheWrite = a.input+a.cacheRead+a.cacheWrite, a.cacheRead, a.cacheWrite
	if !absentValue(output) {
		u.Found, u.Partial = true, false
	} else if !u.Found && !absentValue(input) {
		u.Partial = true
	}
}

// absentValue tells a missing or null JSON value from a bad one.
func absentValue(raw []byte) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// rawBytes is a gjson result's raw JSON; nil when it does not exist.
func rawBytes(r gjson.Result) []byte {
	if !r.Exists() {
		return nil
	}
	return []byte(r.Raw)
}

// stripAll removes every occurrence of sub from b, in place.
func stripAll(b, sub []byte) []byte {
	i := bytes.Index(b, sub)
	if i < 0 {
		return b
	}
	out := b[:i]
	rest := b[i+len(sub):]
	for {
		j := bytes.Index(rest, sub)
		if j < 0 {
			return append(out, rest...)
		}
		out = append(out, rest[:j]...)
		rest = rest[j+len(sub):]
	}
}
