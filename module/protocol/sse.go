// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/tidwall/gjson"
)

// sseEvents splits a buffer of server-sent events into events, each up to
// and including the blank line that ends it. Lines end in "\r\n", "\n" or
// "\r", as the SSE spec allows, mixed freely. A "\r" that ends b ends its
// line: when a "\n" follows in the next bytes, it reads as a blank line of
// its own, which SSE ignores. A blank line that starts b is an (empty)
// event of its own.
type sseEvents struct {
	b   []byte
	pos int // the start of the next event
	lf  int // the first '\n' at or after the line being read; -1: none in b
}

func newSSEEvents(b []byte) sseEvents {
	return sseEvents{b: b, lf: bytes.IndexByte(b, '\n')}
}

// next returns the next complete event; false when the rest, from pos,
// holds none.
func (s *sseEvents) next() ([]byte, bool) {
	b := s.b
	for i := s.pos; ; {
		if s.lf >= 0 && s.lf < i {
			if s.lf = bytes.IndexByte(b[i:], '\n'); s.lf >= 0 {
				s.lf += i
			}
		}
		end := len(b)
		if s.lf >= 0 {
			end = s.lf
		}
		if r := bytes.IndexByte(b[i:end], '\r'); r >= 0 {
			end = i + r
		}
		if end == len(b) {
			return nil, false // no line end in sight
		}
		next := end + 1
		if b[end] == '\r' && next < len(b) && b[next] == '\n' {
			next++
		}
		if end == i { // a blank line: the event ends here
			ev := b[s.pos:next]
			s.pos = next
			return ev, true
		}
		i = next
	}
}

// sseData returns the data of an event: the values of its data fields,
// joined by "\n" (into a new slice only when there are several).
// Comments and other fields are skipped.
func sseData(event []byte) []byte {
	var data, joined []byte
	n := 0
	for len(event) > 0 {
		end := bytes.IndexAny(event, "\r\n")
		line := event
		if end >= 0 {
			line, event = event[:end], event[end+1:]
		} else {
			event = nil
		}
		v, ok := bytes.CutPrefix(line, []byte("data"))
		if !ok {
			continue
		}
		switch {
		case len(v) == 0:
		case v[0] != ':':
			continue // another field (a "database:"), not data
		default:
			v = v[1:]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
		}
		n++
		switch n {
		case 1:
			data = v
		case 2:
			joined = append(append(append(joined, data...), '\n'), v...)
		default:
			joined = append(append(joined, '\n'), v...)
		}
	}
	if n > 1 {
		return joined
	}
	return data
}

// jsonValueAt returns the index of the first byte of the value of the
// first key in b, from i on, spelled "name" (quotes included), and the
// index to search on from; -1 when there is none. Whitespace around the
// colon is allowed.
func jsonValueAt(b []byte, key []byte, i int) (value, next int) {
	for {
		k := bytes.Index(b[i:], key)
		if k < 0 {
			return -1, len(b)
		}
		i += k + len(key)
		j := jsonscan.SkipSpace(b, i)
		if j < len(b) && b[j] == ':' {
			return jsonscan.SkipSpace(b, j+1), i
		}
	}
}

// hasValue reports whether some key spelled key in b has a value that
// starts with c (for instance '{' for an object, '"' for a string).
func hasValue(b, key []byte, c byte) bool {
	for i := 0; i < len(b); {
		v, next := jsonValueAt(b, key, i)
		if v < 0 {
			return false
		}
		if v < len(b) && b[v] == c {
			return true
		}
		i = next
	}
	return false
}

// eventType is the type at the top of an event's data object (an
// Anthropic event's: message_start, message_stop, ...), "" if none.
func eventType(ev []byte) string {
	i := dataStart(ev)
	if i < 0 {
		return ""
	}
	var typ []byte
	jsonscan.ObjectFields(ev, jsonscan.SkipSpace(ev, i), jsonscan.MaxNesting, func(key, raw []byte, _ int) {
		if typ == nil && string(key) == "type" && raw[0] == '"' {
			typ = raw[1 : len(raw)-1] // the types compared are plain words
		}
	})
	return string(typ)
}

var (
	usageName        = []byte(`"usage"`)
	choicesName      = []byte(`"choices"`)
	finishReasonName = []byte(`"finish_reason"`)
)

// messageStop is the type of the event that ends an Anthropic stream.
const messageStop = "message_stop"

// emptyChoices reports whether an event's choices are an empty array,
// as in the usage-only chunk of a stream.
func emptyChoices(b []byte) bool {
	v, _ := jsonValueAt(b, choicesName, 0)
	if v < 0 || v >= len(b) || b[v] != '[' {
		return false
	}
	j := jsonscan.SkipSpace(b, v+1)
	return j < len(b) && b[j] == ']'
}

var dataField = []byte("data:")

// dataStart returns the offset of the value of an event's first data
// line, or -1.
func dataStart(ev []byte) int {
	for at := 0; at < len(ev); {
		if bytes.HasPrefix(ev[at:], dataField) {
			return at + len(dataField)
		}
		j := bytes.IndexAny(ev[at:], "\r\n")
		if j < 0 {
			return -1
		}
		at += j + 1
	}
	return -1
}

// streamEnd tells the events that end a (chat) completion stream before
// its finish_reason: vLLM's error event, and the [DONE] after it.
type streamEnd int

const (
	streamGoesOn streamEnd = iota
	streamDone             // data: [DONE]
	streamError            // data: {"error":{...}}, vLLM's flat {"object":"error",...}, TGI's {"error":"..."}
)

var doneData = []byte("[DONE]")

// endOf reads what an event says of the stream's end, and an error
// event's message.
func endOf(ev []byte) (streamEnd, string) {
	i := dataStart(ev)
	if i < 0 {
		return streamGoesOn, ""
	}
	data := ev[jsonscan.SkipSpace(ev, i):]
	if bytes.HasPrefix(data, doneData) {
		return streamDone, ""
	}
	if len(data) == 0 || data[0] != '{' || !bytes.Contains(data, errorName) {
		return streamGoesOn, ""
	}
	switch e := gjson.GetBytes(data, "error"); {
	case e.IsObject():
		return streamError, e.Get("message").String()
	case e.Type == gjson.String:
		return streamError, e.String() // TGI's {"error":"..."}
	}
	if gjson.GetBytes(data, "object").String() == "error" {
		return streamError, gjson.GetBytes(data, "message").String()
	}
	return streamGoesOn, ""
}

var errorName = []byte(`"error"`)
