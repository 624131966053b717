// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"io"
	"sync"

	"github.com/tidwall/gjson"
)

// maxUsageBody is the largest non-streamed response body kept to read its
// usage; larger bodies pass through uncounted.
const maxUsageBody = 4 << 20

// usageScanner follows a response body on its way to the client and reads
// the token usage from it: from a JSON body's usage object, or from the
// usage chunk at the end of an SSE stream. When the gateway asked the
// upstream for stream usage on the client's behalf (strip), it removes
// what the client did not ask for: the usage-only chunk and the
// "usage":null field of the other chunks.
type usageScanner struct {
	sse    bool
	strip  bool
	whole  bool    // pass a stream on whole events at a time (strip does too)
	buf    []byte  // the JSON body so far, or the current partial SSE event
	pooled *[]byte // buf's holder from usageBufs, if any
	full   bool    // a JSON body outgrew maxUsageBody

	prompt, completion int64
	found              bool
}

var (
	sepEvent  = []byte("\n\n")
	usageKey  = []byte(`"usage":{`)
	usageNull = []byte(`,"usage":null`)
	noChoices = []byte(`"choices":[]`)
)

// usageBufs recycles the scanners' buffers: most bodies and partial
// events are small, and a request would otherwise allocate one.
var usageBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf is the largest buffer put back for reuse.
const maxPooledBuf = 64 << 10

// grow appends p to the buffer, taking one from the pool first.
func (u *usageScanner) grow(p []byte) {
	if u.buf == nil {
		u.pooled = usageBufs.Get().(*[]byte)
		u.buf = (*u.pooled)[:0]
	}
	u.buf = append(u.buf, p...)
}

// release puts the buffer back; the scanner must not be written to after.
func (u *usageScanner) release() {
	if u.pooled != nil && cap(u.buf) <= maxPooledBuf {
		*u.pooled = u.buf[:0]
		usageBufs.Put(u.pooled)
	}
	u.pooled, u.buf = nil, nil
}

// write passes p on to w (for a stream whose extra chunk is stripped, or
// with whole set, whole events at a time) and reports the bytes it wrote
// to w.
func (u *usageScanner) write(w io.Writer, p []byte) (int, error) {
	if !u.sse {
		if !u.full {
			if len(u.buf)+len(p) > maxUsageBody {
				u.full = true
				u.release()
			} else {
				u.grow(p)
			}
		}
		return w.Write(p)
	}
	if !u.strip && !u.whole {
		u.scanEvents(p, nil)
		return w.Write(p)
	}
	return u.scanEvents(p, w)
}

// scanEvents appends p to the partial event and handles each complete
// event: reads usage from it and, when w is not nil, writes it to w
// (stripped). Without w the bytes were already passed on. The buffer is
// reused: the partial event moves to its front.
func (u *usageScanner) scanEvents(p []byte, w io.Writer) (int, error) {
	u.grow(p)
	written, start := 0, 0
	var err error
	for err == nil {
		i := bytes.Index(u.buf[start:], sepEvent)
		if i < 0 {
			break
		}
		event := u.buf[start : start+i+2]
		start += i + 2
		if bytes.Contains(event, usageKey) {
			u.readUsage(event)
			if u.strip && bytes.Contains(event, noChoices) {
				continue // the usage-only chunk the client did not ask for
			}
		}
		if w != nil {
			var n int
			if u.strip {
				event = stripAll(event, usageNull)
			}
			n, err = w.Write(event)
			written += n
		}
	}
	n := copy(u.buf, u.buf[start:])
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

// finish writes what is left of a stripped stream (an unterminated last
// event) and, for a JSON body, reads its usage. It releases the buffer.
func (u *usageScanner) finish(w io.Writer) {
	switch {
	case u.sse:
		if (u.strip || u.whole) && len(u.buf) > 0 {
			_, _ = w.Write(u.buf)
		}
	case !u.full && len(u.buf) > 0:
		u.readUsageJSON(u.buf)
	}
	u.release()
}

// readUsage reads the usage of one SSE event ("data: {...}\n\n").
func (u *usageScanner) readUsage(event []byte) {
	data, ok := bytes.CutPrefix(event, []byte("data: "))
	if !ok {
		data, ok = bytes.CutPrefix(event, []byte("data:"))
	}
	if ok {
		u.readUsageJSON(bytes.TrimSpace(data))
	}
}

func (u *usageScanner) readUsageJSON(body []byte) {
	// the usage object comes last in OpenAI-style bodies: read it alone
	// rather than walking the whole answer
	if i := bytes.LastIndex(body, usageKey); i >= 0 {
		var prompt, completion int64
		seen := false
		_, ok := objectFields(body, i+len(usageKey)-1, 4, func(key, raw []byte, _ int) {
			switch string(key) {
			case "prompt_tokens":
				prompt, seen = jsonInt(raw), true
			case "completion_tokens":
				completion, seen = jsonInt(raw), true
			}
		})
		if ok && seen {
			u.prompt, u.completion, u.found = prompt, completion, true
			return
		}
	}
	r := gjson.GetManyBytes(body, "usage.prompt_tokens", "usage.completion_tokens")
	if r[0].Exists() || r[1].Exists() {
		// the last usage seen wins (continuous usage stats repeat it)
		u.prompt, u.completion, u.found = r[0].Int(), r[1].Int(), true
	}
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
