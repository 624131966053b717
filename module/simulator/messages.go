// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"
)

// Anthropic's Messages API as vLLM serves it (vllm/entrypoints/anthropic):
// the chat pipeline's answer in the Messages shape, its id the chat
// completion's, its model the served name, its usage without cache
// counts, no stop_sequence when none matched, and a stream of named
// events without pings; its errors in Anthropic's envelope with vLLM's
// own types.

// anthropicError is an error in Anthropic's envelope.
type anthropicError struct {
	Type  string                 `json:"type"`
	Error anthropicErrorInfoBody `json:"error"`
}

type anthropicErrorInfoBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func anthropicErrorBody(typ, msg string) anthropicError {
	return anthropicError{Type: "error", Error: anthropicErrorInfoBody{Type: typ, Message: msg}}
}

// stopReason is the Messages API's stop_reason of a chat finish_reason.
func stopReason(finish string) string {
	if finish == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

// appendMessage appends a non-streamed Messages answer.
func (c *completion) appendMessage(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, c.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendJSONString(b, c.model)
	b = append(b, `,"content":[{"type":"text","text":`...)
	b = appendJSONString(b, GeneratedText(c.tokens))
	b = append(b, `}],"stop_reason":`...)
	b = appendJSONString(b, stopReason(c.finish))
	b = append(b, `,"usage":`...)
	b = c.appendInputUsage(b)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(c.tokens), 10)
	return append(b, "}}"...)
}

// appendInputUsage appends the start of a Messages usage object: its
// input_tokens, the whole prompt's, as vLLM counts them (it reports no
// cache reads there, prefix caching or not).
func (c *completion) appendInputUsage(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	return strconv.AppendInt(b, int64(c.promptTokens), 10)
}

// appendEvent appends one named event.
func appendEvent(b []byte, name string, data ...[]byte) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	for _, d := range data {
		b = append(b, d...)
	}
	return append(b, "\n\n"...)
}

// respondMessages streams a Messages answer: message_start, one text
// block of a content_block_delta a token, message_delta with the usage,
// message_stop. cut > 0 aborts the connection after that many events.
func (c *completion) respondMessages(ctx context.Context, w http.ResponseWriter, itl time.Duration, cut int) (int, bool) {
	var timer *time.Timer
	defer func() { stopTimer(timer) }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	events := 0
	var buf []byte
	send := func() bool {
		out := buf
		if c.eol != "" && c.eol != "\n" {
			out = bytes.ReplaceAll(buf, []byte("\n"), []byte(c.eol))
		}
		if _, err := w.Write(out); err != nil || rc.Flush() != nil {
			return false
		}
		if events++; cut > 0 && events >= cut {
			abortConn(w)
			return false
		}
		return true
	}
	start := append([]byte(`{"type":"message_start","message":{"id":`), appendJSONString(nil, c.id)...)
	start = append(start, `,"type":"message","role":"assistant","model":`...)
	start = append(append(start, appendJSONString(nil, c.model)...), `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	start = append(c.appendInputUsage(start), `,"output_tokens":0}}}`...)
	buf = appendEvent(buf[:0], "message_start", start)
	if !send() {
		return 0, false
	}
	buf = appendEvent(buf[:0], "content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	if !send() {
		return 0, false
	}
	for i := 0; i < c.tokens; i++ {
		if i > 0 && !pause(ctx, itl, &timer) {
			return i, false
		}
		delta := appendJSONString([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`), tokenText(i))
		buf = appendEvent(buf[:0], "content_block_delta", delta, []byte("}}"))
		if !send() {
			return i + 1, false
		}
	}
	buf = appendEvent(buf[:0], "content_block_stop", []byte(`{"type":"content_block_stop","index":0}`))
	if !send() {
		return c.tokens, false
	}
	md := append([]byte(`{"type":"message_delta","delta":{"stop_reason":`), appendJSONString(nil, stopReason(c.finish))...)
	md = append(md, `,"stop_sequence":null},"usage":`...)
	md = c.appendInputUsage(md)
	md = append(strconv.AppendInt(append(md, `,"output_tokens":`...), int64(c.tokens), 10), "}}"...)
	buf = appendEvent(buf[:0], "message_delta", md)
	if !send() {
		return c.tokens, false
	}
	buf = appendEvent(buf[:0], "message_stop", []byte(`{"type":"message_stop"}`))
	return c.tokens, send()
}
