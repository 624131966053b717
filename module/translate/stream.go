// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Stream turns a chat completion stream into the Messages API's events
// as it passes: message_start at the first chunk; a text block for the
// content, a tool_use block for each tool call (its arguments as
// input_json_delta); content_block_stop as a block ends; message_delta
// (stop reason, usage) and message_stop once the stream is whole (its
// [DONE], or its end after a finish_reason). It reads events split
// anywhere, framed with \n or \r\n. A stream that ends before its
// finish_reason gets no message_stop: the caller tells the client it was
// cut. The zero Stream is not ready: set Model.
type Stream struct {
	// The model name the client gets, as a JSON string.
	Model []byte

	line    []byte // a line not yet whole
	data    []byte // the data of the event under way
	out     []byte // events to write
	id      string // the message's id
	started bool
	ended   bool
	// the blocks started so far, the open one's kind, and the tool calls
	// by the upstream's index: their blocks
	blocks  int
	open    byte // 0, 't' (text) or 'u' (tool_use)
	tools   []toolBlock
	finish  string // the finish_reason, once seen
	stopSeq []byte // vLLM's stop_reason, if a string (raw JSON)
	usage   usage
}

// toolBlock is a tool call's block: the upstream's index and id for it.
type toolBlock struct {
	idx   int64
	id    string
	block int
}

// maxLine caps a line of the chat stream (an event's data is one line).
const maxLine = 8 << 20

// errLineTooLong is Stream's error for a line over maxLine.
var errLineTooLong = errors.New("a chat stream line too long to translate")

// Pass reads p, a part of the chat stream, and writes the events it
// completes to w.
func (s *Stream) Pass(w io.Writer, p []byte) (int, error) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.line)+len(p) > maxLine {
				return 0, errLineTooLong
			}
			s.line = append(s.line, p...)
			break
		}
		line := p[:i]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		s.readLine(bytes.TrimSuffix(line, []byte{'\r'}))
		s.line = s.line[:0]
		p = p[i+1:]
	}
	return s.flush(w)
}

// Finish ends the events: the stream's whole end if it had its
// finish_reason and no [DONE] said so yet.
func (s *Stream) Finish(w io.Writer) error {
	if len(s.line) > 0 {
		s.readLine(bytes.TrimSuffix(s.line, []byte{'\r'}))
		s.line = s.line[:0]
	}
	s.event()
	if s.finish != "" && !s.ended {
		s.end()
	}
	_, err := s.flush(w)
	return err
}

// Whole reports whether the events have ended with message_stop.
func (s *Stream) Whole() bool { return s.ended }

func (s *Stream) flush(w io.Writer) (int, error) {
	if len(s.out) == 0 {
		return 0, nil
	}
	n, err := w.Write(s.out)
	s.out = s.out[:0]
	return n, err
}

// readLine reads one line of the event stream.
func (s *Stream) readLine(line []byte) {
	switch {
	case len(line) == 0:
		s.event()
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[5:], []byte{' '})
		if len(s.data)+len(v) > maxLine {
			return // not an event a chat stream sends: dropped whole
		}
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, v...)
	}
}

// event handles the event whose data was read.
func (s *Stream) event() {
	data := s.data
	s.data = s.data[:0]
	if len(data) == 0 || s.ended {
		return
	}
	if string(data) == "[DONE]" {
		if s.finish != "" {
			s.end()
		}
		return
	}
	chunk := parse(data)
	if !chunk.IsObject() || chunk.Get("error").Exists() {
		return // the caller tells the client of a stream that fails
	}
	if !s.started {
		s.start(chunk)
	}
	if u := chunk.Get("usage"); u.IsObject() {
		s.usage = readUsage(u)
	}
	choice := chunk.Get("choices.0")
	if !choice.Exists() {
		return
	}
	delta := choice.Get("delta")
	if text := delta.Get("content"); text.Type == gjson.String && text.Str != "" {
		if s.open != 't' {
			s.openBlock('t', `{"type":"text","text":""}`)
		}
		s.deltaEvent(s.blocks, `{"type":"text_delta","text":`, text.Raw)
	}
	delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		s.toolCall(tc)
		return true
	})
	if f := choice.Get("finish_reason"); f.Type == gjson.String && f.Str != "" {
		s.finish = strings.Clone(f.Str) // the data's bytes are reused
		if sr := choice.Get("stop_reason"); sr.Type == gjson.String {
			s.stopSeq = append(s.stopSeq[:0], sr.Raw...)
		}
		s.closeBlock()
	}
}

// toolCall handles a tool call's fragment: a new call (an index not
// seen, or a new id at one) opens a tool_use block; its arguments are
// input_json_delta of its block, wherever the upstream interleaves them.
func (s *Stream) toolCall(tc gjson.Result) {
	idx, id := tc.Get("index").Int(), tc.Get("id").Str
	i := slices.IndexFunc(s.tools, func(t toolBlock) bool { return t.idx == idx })
	if i < 0 || (id != "" && id != s.tools[i].id) {
		s.closeBlock() // the new block's index is the next
		if id == "" {
			id = toolID(s.id, s.blocks)
		}
		block := make([]byte, 0, 64)
		block = append(block, `{"type":"tool_use","id":`...)
		block = gjson.AppendJSONString(block, id)
		block = append(block, `,"name":`...)
		block = gjson.AppendJSONString(block, tc.Get("function.name").Str)
		block = append(block, `,"input":{}}`...)
		s.openBlock('u', string(block))
		t := toolBlock{idx: idx, id: strings.Clone(id), block: s.blocks}
		if i < 0 {
			s.tools = append(s.tools, t)
		} else {
			s.tools[i] = t
		}
		i = slices.IndexFunc(s.tools, func(t toolBlock) bool { return t.idx == idx })
	}
	if args := tc.Get("function.arguments"); args.Type == gjson.String && args.Str != "" {
		s.deltaEvent(s.tools[i].block, `{"type":"input_json_delta","partial_json":`, args.Raw)
	}
}

// start writes message_start.
func (s *Stream) start(chunk gjson.Result) {
	s.started = true
	s.id = messageID(chunk.Get("id").Str)
	s.out = append(s.out, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	s.out = gjson.AppendJSONString(s.out, s.id)
	s.out = append(s.out, `,"type":"message","role":"assistant","model":`...)
	s.out = append(s.out, s.Model...)
	s.out = append(s.out, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	s.out = strconv.AppendInt(s.out, max(chunk.Get("usage.prompt_tokens").Int()-chunk.Get("usage.prompt_tokens_details.cached_tokens").Int(), 0), 10)
	s.out = append(s.out, ",\"output_tokens\":0}}}\n\n"...)
}

// openBlock closes the open block and opens one of kind with
// content_block_start's content_block.
func (s *Stream) openBlock(kind byte, block string) {
	s.closeBlock()
	s.open = kind
	s.out = append(s.out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks), 10)
	s.out = append(s.out, `,"content_block":`...)
	s.out = append(s.out, block...)
	s.out = append(s.out, "}\n\n"...)
}

// deltaEvent writes a content_block_delta of block index: its delta,
// prefix and value (raw JSON) closed with a brace.
func (s *Stream) deltaEvent(index int, prefix, value string) {
	s.out = append(s.out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(index), 10)
	s.out = append(s.out, `,"delta":`...)
	s.out = append(s.out, prefix...)
	s.out = append(s.out, value...)
	s.out = append(s.out, "}}\n\n"...)
}

// closeBlock writes content_block_stop for the open block, if any.
func (s *Stream) closeBlock() {
	if s.open == 0 {
		return
	}
	s.out = append(s.out, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	s.out = strconv.AppendInt(s.out, int64(s.blocks), 10)
	s.out = append(s.out, "}\n\n"...)
	s.open = 0
	s.blocks++
}

// end writes message_delta, with the stop reason and the usage, and
// message_stop.
func (s *Stream) end() {
	if !s.started {
		s.start(gjson.Result{})
	}
	s.closeBlock()
	s.ended = true
	s.out = append(s.out, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"...)
	s.out = appendStop(s.out, s.finish, len(s.tools) > 0, gjson.ParseBytes(s.stopSeq))
	s.out = append(s.out, `},"usage":`...)
	s.out = appendUsage(s.out, s.usage, false)
	s.out = append(s.out, "}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
