// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"errors"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Options say how a target takes a translated request.
type Options struct {
	// The target's model name, as a JSON string.
	Model []byte
	// The field that bounds the answer's length: max_completion_tokens
	// (OpenAI's reasoning models refuse max_tokens) or max_tokens (what
	// every OpenAI-compatible server knows). Default: max_tokens.
	MaxTokensField string
	// The target speaks vLLM's dialect: it takes top_k, and continues a
	// last assistant message (a prefill) when asked to.
	VLLM bool
	// Drop what chat cannot carry (see Losses) instead of failing.
	Lossy bool
	// A stream is sent without stream_options (the target refuses the
	// field): its usage is then what the target sends unasked.
	NoStreamUsage bool
}

// ErrLoss is ToChat's error for a request with parts chat cannot carry,
// without Options.Lossy.
var ErrLoss = errors.New("the request holds what chat completions cannot carry")

// ErrNotMessages is ToChat's error for a body that is not a Messages
// request (not an object, or messages not an array).
var ErrNotMessages = errors.New("not a Messages request")

// ToChat returns Messages request body as a chat completions request: the
// system prompt as the first message; text, images, tool calls
// (tool_use, an assistant's tool_calls) and their results (tool_result,
// tool messages, ahead of the user's other content) in order;
// max_tokens, stop_sequences (stop), temperature, top_p, top_k where the
// target takes it, tools and tool_choice (any: required;
// disable_parallel_tool_use: parallel_tool_calls false), metadata.user_id
// (user); a stream asks for its usage.
func ToChat(body []byte, o Options) ([]byte, error) {
	req := parse(body)
	var f topFields
	if !req.IsObject() {
		return nil, ErrNotMessages
	}
	req.ForEach(func(k, v gjson.Result) bool {
		f.set(k.Str, v)
		return true
	})
	if !f.messages.IsArray() {
		return nil, ErrNotMessages
	}
	if !o.Lossy && len(Losses(body, o.VLLM)) > 0 {
		return nil, ErrLoss
	}
	out := make([]byte, 0, len(body)+len(body)/8+128)
	out = append(out, `{"model":`...)
	out = append(out, o.Model...)
	out = append(out, `,"messages":[`...)
	n := 0
	if sys := f.system; sys.Type == gjson.String || hasText(sys) {
		out = append(out, `{"role":"system","content":`...)
		out = appendText(out, sys, billingHeader)
		out = append(out, '}')
		n++
	}
	last := ""
	f.messages.ForEach(func(_, m gjson.Result) bool {
		out, n = appendMessage(out, n, m)
		last = m.Get("role").Str
		return true
	})
	out = append(out, ']')
	if v := f.maxTokens; v.Exists() {
		field := o.MaxTokensField
		if field == "" {
			field = "max_tokens"
		}
		out = appendField(out, field, v.Raw)
	}
	if v := f.stop; v.IsArray() && v.Raw != "[]" {
		out = appendField(out, "stop", v.Raw)
	}
	if v := f.temperature; v.Exists() {
		out = appendField(out, "temperature", v.Raw)
	}
	if v := f.topP; v.Exists() {
		out = appendField(out, "top_p", v.Raw)
	}
	if v := f.topK; v.Exists() && o.VLLM {
		out = appendField(out, "top_k", v.Raw)
	}
	// with no tool carried, no tool choice either (chat refuses one
	// without tools), nor one that names a tool left out
	if names := carriedTools(f.tools); len(names) > 0 {
		out = appendTools(out, f.tools)
		if v := f.toolChoice; v.IsObject() && (v.Get("type").Str != "tool" || slices.Contains(names, v.Get("name").Str)) {
			out = appendToolChoice(out, v)
		}
	}
	if v := f.metadata.Get("user_id"); v.Type == gjson.String {
		out = appendField(out, "user", v.Raw)
	}
	if o.VLLM && last == "assistant" {
		// a prefill: the answer goes on from it
		out = append(out, `,"continue_final_message":true,"add_generation_prompt":false`...)
	}
	if f.stream.Bool() {
		out = append(out, `,"stream":true`...)
		if !o.NoStreamUsage {
			out = append(out, `,"stream_options":{"include_usage":true}`...)
		}
	}
	return append(out, '}'), nil
}

// topFields are the top-level fields of a Messages request that ToChat
// reads, found in one pass.
type topFields struct {
	messages, system, maxTokens, stop, temperature, topP, topK, tools, toolChoice, metadata, stream gjson.Result
}

func (f *topFields) set(key string, v gjson.Result) {
	switch key {
	case "messages":
		f.messages = v
	case "system":
		f.system = v
	case "max_tokens":
		f.maxTokens = v
	case "stop_sequences":
		f.stop = v
	case "temperature":
		f.temperature = v
	case "top_p":
		f.topP = v
	case "top_k":
		f.topK = v
	case "tools":
		f.tools = v
	case "tool_choice":
		f.toolChoice = v
	case "metadata":
		f.metadata = v
	case "stream":
		f.stream = v
	}
}

// appendField appends ,"key":raw to an object under way.
func appendField(out []byte, key, raw string) []byte {
	out = append(out, ',', '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	return append(out, raw...)
}

// billingHeader starts the system block Claude Code adds for Anthropic's
// billing: a value that changes with every request, which would keep a
// chat target's prefix cache from ever matching the system prompt. It is
// left out (as vLLM's own Messages API does).
const billingHeader = "x-anthropic-billing-header"

// appendText appends a content's text as a JSON string: a string as it
// is, the text blocks of an array (but those that start with skip, if
// set) joined by newlines, their escaped bytes copied as they are.
func appendText(out []byte, content gjson.Result, skip ...string) []byte {
	if content.Type == gjson.String {
		return append(out, content.Raw...)
	}
	out = append(out, '"')
	first := true
	content.ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").Str != "text" {
			return true
		}
		if t := b.Get("text"); t.Type == gjson.String && !(len(skip) > 0 && strings.HasPrefix(t.Str, skip[0])) {
			if !first {
				out = append(out, '\\', 'n')
			}
			first = false
			out = append(out, t.Raw[1:len(t.Raw)-1]...)
		}
		return true
	})
	return append(out, '"')
}

// hasText reports whether a content holds text: a string, or a text
// block.
func hasText(content gjson.Result) bool {
	if content.Type == gjson.String {
		return content.Str != ""
	}
	found := false
	content.ForEach(func(_, b gjson.Result) bool {
		found = b.Get("type").Str == "text" && b.Get("text").Str != ""
		return !found
	})
	return found
}

// appendMessage appends Messages message m as chat messages (a user's
// tool results are tool messages of their own, ahead of the rest); n is
// the messages appended so far, returned updated.
func appendMessage(out []byte, n int, m gjson.Result) ([]byte, int) {
	role, content := m.Get("role").String(), m.Get("content")
	sep := func() {
		if n > 0 {
			out = append(out, ',')
		}
		n++
	}
	if content.Type == gjson.String {
		sep()
		out = append(out, `{"role":`...)
		out = gjson.AppendJSONString(out, role)
		out = append(out, `,"content":`...)
		out = append(out, content.Raw...)
		return append(out, '}'), n
	}
	if role == "assistant" {
		sep()
		return appendAssistant(out, content), n
	}
	parts := 0
	content.ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").String() == "tool_result" {
			sep()
			out = append(out, `{"role":"tool","tool_call_id":`...)
			out = gjson.AppendJSONString(out, b.Get("tool_use_id").String())
			out = append(out, `,"content":`...)
			out = appendText(out, b.Get("content"))
			out = append(out, '}')
			// its images (a screenshot, a file read): a tool message
			// holds text only, a user message after it the images
			if images := resultImages(b.Get("content")); len(images) > 0 {
				sep()
				out = append(out, `{"role":"user","content":[`...)
				for i, img := range images {
					if i > 0 {
						out = append(out, ',')
					}
					out = appendPart(out, img)
				}
				out = append(out, ']', '}')
			}
		} else if partCarried(b) {
			parts++
		}
		return true
	})
	if parts == 0 {
		return out, n
	}
	sep()
	out = append(out, `{"role":`...)
	out = gjson.AppendJSONString(out, role)
	out = append(out, `,"content":[`...)
	first := true
	content.ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").String() == "tool_result" || !partCarried(b) {
			return true
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = appendPart(out, b)
		return true
	})
	return append(out, ']', '}'), n
}

// resultImages are the images of a tool result's content that chat
// carries.
func resultImages(content gjson.Result) []gjson.Result {
	var images []gjson.Result
	if content.IsArray() {
		content.ForEach(func(_, c gjson.Result) bool {
			if c.Get("type").Str == "image" && imageCarried(c) {
				images = append(images, c)
			}
			return true
		})
	}
	return images
}

// partCarried reports whether a user's content block becomes a content
// part: text, or an image inline or by URL.
func partCarried(b gjson.Result) bool {
	switch b.Get("type").String() {
	case "text":
		return true
	case "image":
		return imageCarried(b)
	}
	return false
}

// appendPart appends a text or image block as a chat content part.
func appendPart(out []byte, b gjson.Result) []byte {
	if b.Get("type").String() == "text" {
		out = append(out, `{"type":"text","text":`...)
		out = append(out, b.Get("text").Raw...)
		return append(out, '}')
	}
	src := b.Get("source")
	out = append(out, `{"type":"image_url","image_url":{"url":`...)
	if src.Get("type").String() == "url" {
		out = append(out, src.Get("url").Raw...)
	} else {
		out = gjson.AppendJSONString(out, "data:"+src.Get("media_type").String()+";base64,"+src.Get("data").String())
	}
	return append(out, '}', '}')
}

// appendAssistant appends an assistant's blocks as one chat message: its
// text as the content, its tool_use blocks as tool_calls.
func appendAssistant(out []byte, content gjson.Result) []byte {
	out = append(out, `{"role":"assistant"`...)
	calls := 0
	content.ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").String() != "tool_use" {
			return true
		}
		if calls == 0 {
			out = append(out, `,"tool_calls":[`...)
		} else {
			out = append(out, ',')
		}
		calls++
		out = append(out, `{"id":`...)
		out = gjson.AppendJSONString(out, b.Get("id").String())
		out = append(out, `,"type":"function","function":{"name":`...)
		out = gjson.AppendJSONString(out, b.Get("name").String())
		out = append(out, `,"arguments":`...)
		input := b.Get("input").Raw
		if input == "" {
			input = "{}"
		}
		out = gjson.AppendJSONString(out, input)
		out = append(out, '}', '}')
		return true
	})
	if calls > 0 {
		out = append(out, ']')
	}
	if calls == 0 || hasText(content) {
		out = append(out, `,"content":`...)
		out = appendText(out, content)
	}
	return append(out, '}')
}

// carriedTools are the names of the custom tools of a request's tools,
// those chat carries.
func carriedTools(tools gjson.Result) []string {
	var names []string
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ == "" || typ == "custom" {
			names = append(names, t.Get("name").Str)
		}
		return true
	})
	return names
}

// appendTools appends custom tools as functions.
func appendTools(out []byte, tools gjson.Result) []byte {
	out = append(out, `,"tools":[`...)
	first := true
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").String(); typ != "" && typ != "custom" {
			return true // a loss (see Losses)
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, `{"type":"function","function":{"name":`...)
		out = gjson.AppendJSONString(out, t.Get("name").Str)
		if d := t.Get("description"); d.Type == gjson.String {
			out = appendField(out, "description", d.Raw)
		}
		schema := t.Get("input_schema").Raw
		if schema == "" {
			schema = `{"type":"object"}`
		}
		out = appendField(out, "parameters", schema)
		if s := t.Get("strict"); s.IsBool() {
			out = appendField(out, "strict", s.Raw)
		}
		out = append(out, '}', '}')
		return true
	})
	return append(out, ']')
}

// appendToolChoice appends tool_choice as chat's: auto, required (any),
// none, or the named function; disable_parallel_tool_use as
// parallel_tool_calls false.
func appendToolChoice(out []byte, c gjson.Result) []byte {
	switch c.Get("type").String() {
	case "auto":
		out = append(out, `,"tool_choice":"auto"`...)
	case "any":
		out = append(out, `,"tool_choice":"required"`...)
	case "none":
		out = append(out, `,"tool_choice":"none"`...)
	case "tool":
		out = append(out, `,"tool_choice":{"type":"function","function":{"name":`...)
		out = gjson.AppendJSONString(out, c.Get("name").Str)
		out = append(out, '}', '}')
	}
	if c.Get("disable_parallel_tool_use").Bool() {
		out = append(out, `,"parallel_tool_calls":false`...)
	}
	return out
}
