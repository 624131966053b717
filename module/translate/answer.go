// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Answer returns chat completion answer as a Messages API message: its
// first choice's text and tool calls as content blocks, its finish
// reason as the stop reason, its usage with the cached prompt tokens
// apart (input_tokens counts only those not read from the cache, as
// Anthropic's does). model is the name the client gets, as a JSON
// string. ok is false for a body that is not a chat completion.
func Answer(answer, model []byte) (out []byte, ok bool) {
	a := parse(answer)
	choice := a.Get("choices.0")
	if !a.IsObject() || !choice.IsObject() {
		return nil, false
	}
	msg := choice.Get("message")
	out = make([]byte, 0, len(answer)+64)
	out = append(out, `{"id":`...)
	out = gjson.AppendJSONString(out, messageID(a.Get("id").Str))
	out = append(out, `,"type":"message","role":"assistant","model":`...)
	out = append(out, model...)
	out = append(out, `,"content":[`...)
	blocks, calls := 0, 0
	finish := choice.Get("finish_reason").Str
	for _, text := range [...]gjson.Result{msg.Get("content"), msg.Get("refusal")} {
		if text.Type == gjson.String && text.Str != "" {
			if blocks > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"type":"text","text":`...)
			out = append(out, text.Raw...)
			out = append(out, '}')
			blocks++
		}
	}
	if r := msg.Get("refusal"); r.Type == gjson.String && r.Str != "" {
		finish = "content_filter" // a refusal, said in its text
	}
	id := messageID(a.Get("id").Str)
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		if blocks > 0 {
			out = append(out, ',')
		}
		callID := tc.Get("id").Str
		if callID == "" {
			callID = toolID(id, blocks)
		}
		blocks++
		calls++
		out = append(out, `{"type":"tool_use","id":`...)
		out = gjson.AppendJSONString(out, callID)
		out = append(out, `,"name":`...)
		out = gjson.AppendJSONString(out, tc.Get("function.name").String())
		out = append(out, `,"input":`...)
		out = append(out, toolInput(tc.Get("function.arguments").String())...)
		out = append(out, '}')
		return true
	})
	out = append(out, ']')
	out = append(out, ',')
	out = appendStop(out, finish, calls > 0, choice.Get("stop_reason"))
	out = append(out, `,"usage":`...)
	out = appendUsage(out, readUsage(a.Get("usage")), true)
	return append(out, '}'), true
}

// messageID is a message id from a chat completion's: msg_ and its own.
func messageID(id string) string {
	if id == "" {
		return "msg_translated"
	}
	return "msg_" + id
}

// toolInput is a tool call's arguments as a tool_use block's input: the
// JSON object the model wrote, or {} for none or for text that is not
// one (as the Anthropic SDKs leave a cut-off call's input).
func toolInput(args string) string {
	if r := gjson.Parse(args); r.IsObject() && gjson.Valid(args) {
		return args
	}
	return "{}"
}

// toolID is an id for a tool call its upstream gave none: the message's
// id and the call's block.
func toolID(messageID string, block int) string {
	return "toolu_" + strings.TrimPrefix(messageID, "msg_") + "_" + strconv.Itoa(block)
}

// stopReason is a chat finish_reason as a Messages stop_reason (an
// answer with tool calls stopped for them, whatever its finish_reason:
// vLLM says stop for a required or named tool); vLLM's stop_reason, when
// it is a string, is the stop sequence that ended the answer.
func stopReason(finish string, calls bool, vllmStop gjson.Result) (reason string, sequence gjson.Result) {
	if calls && (finish == "stop" || finish == "") {
		return "tool_use", gjson.Result{}
	}
	switch finish {
	case "length":
		return "max_tokens", gjson.Result{}
	case "tool_calls", "function_call":
		return "tool_use", gjson.Result{}
	case "content_filter":
		return "refusal", gjson.Result{}
	}
	if vllmStop.Type == gjson.String {
		return "stop_sequence", vllmStop
	}
	return "end_turn", gjson.Result{}
}

// appendStop appends "stop_reason":...,"stop_sequence":...
func appendStop(out []byte, finish string, calls bool, vllmStop gjson.Result) []byte {
	reason, seq := stopReason(finish, calls, vllmStop)
	out = append(out, `"stop_reason":"`...)
	out = append(out, reason...)
	out = append(out, `","stop_sequence":`...)
	if seq.Type == gjson.String {
		return append(out, seq.Raw...)
	}
	return append(out, "null"...)
}

// usage is a chat answer's token counts.
type usage struct {
	prompt, completion, cached int64
}

// readUsage reads a chat usage object.
func readUsage(u gjson.Result) usage {
	return usage{prompt: u.Get("prompt_tokens").Int(), completion: u.Get("completion_tokens").Int(),
		cached: u.Get("prompt_tokens_details.cached_tokens").Int()}
}

// appendUsage appends u as a Messages usage object: input_tokens those
// of the prompt not read from the cache, cache_read_input_tokens the
// others; withCreation adds cache_creation_input_tokens (0: chat does
// not tell).
func appendUsage(out []byte, u usage, withCreation bool) []byte {
	input := max(u.prompt-u.cached, 0)
	out = append(out, `{"input_tokens":`...)
	out = strconv.AppendInt(out, input, 10)
	if withCreation {
		out = append(out, `,"cache_creation_input_tokens":0`...)
	}
	out = append(out, `,"cache_read_input_tokens":`...)
	out = strconv.AppendInt(out, u.cached, 10)
	out = append(out, `,"output_tokens":`...)
	out = strconv.AppendInt(out, u.completion, 10)
	return append(out, '}')
}

// maxAnswer caps a chat answer held whole for its translation.
const maxAnswer = 32 << 20

// errAnswerTooLong is Whole's error for an answer over maxAnswer.
var errAnswerTooLong = errors.New("a chat answer too long to translate")

// Whole holds a chat completion answer as it passes and writes it as a
// message at its end (see Answer). The zero Whole is not ready: set
// Model.
type Whole struct {
	// The model name the client gets, as a JSON string.
	Model []byte
	buf   []byte
}

// Pass holds p, a part of the answer.
func (a *Whole) Pass(_ io.Writer, p []byte) (int, error) {
	if len(a.buf)+len(p) > maxAnswer {
		return 0, errAnswerTooLong
	}
	a.buf = append(a.buf, p...)
	return len(p), nil
}

// Finish writes the answer, translated; one that is not a chat
// completion as it came.
func (a *Whole) Finish(w io.Writer) error {
	out, ok := Answer(a.buf, a.Model)
	if !ok {
		out = a.buf
	}
	a.buf = nil
	_, err := w.Write(out)
	return err
}
