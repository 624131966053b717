// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/tidwall/gjson"
)

// Request is what the gateway reads of a request body: its top-level fields.
type Request struct {
	Model      []byte // the first model field's raw value, nil if none
	ModelAt    int    // its offset in the body
	Models     int    // how many model fields, whatever their spelling
	Stream     bool
	WantsUsage bool // stream_options.include_usage

	HasStreamOptions bool

	// for pre-routing and context windows: the raw values, nil if absent
	PromptFields
	MaxTokens int64
	N         int64 // choices asked for; 0 when not given
	// the bytes of the fields the upstream turns into the prompt:
	// messages, prompt, input, instructions, system, tools and functions
	PromptBytes int

	Watched // the rule fields noted

	Faults // what the gateway refuses a body for
	got    readSeen
}

// PromptFields are the raw values of the fields an upstream makes the
// prompt of (nil if absent): the chat messages and Anthropic's system
// prompt, the legacy prompt, the input of embeddings and responses.
type PromptFields struct {
	Messages, System, Prompt, Input []byte
}

// Faults are what the gateway refuses a body for: a field it reads
// given twice, or of another type than the API gives it.
type Faults struct {
	// the first field the gateway reads that the body gives twice, ""
	// if none: decoders disagree on which one counts (gjson and sjson
	// take the first, Go's and Python's decoders, vLLM's and a cloud's,
	// the last)
	Repeated string
	// the first field the gateway reads for limits or streaming whose
	// value is not of the JSON type the OpenAI API gives it, "" if none:
	// vLLM's lax decoder reads " 5000", 5000.0 and "yes" as the gateway
	// does not
	Mistyped string
}

// Watched are the top-level fields route rules read, and which of them a
// body has.
type Watched struct {
	Watch   []string // rule fields to note
	Present uint64   // bit i: watch[i] is present and not null
}

// readSeen is what a scan has read of the fields it reads, to find one
// given twice.
type readSeen struct {
	fields  uint32 // bit i: readFields[i] was read
	watched uint64 // bit i: watch[i] was read
}

// readFields are the top-level fields the gateway reads or rewrites: the
// names a repeat is reported by, in the order of their bits.
var readFields = [...]string{
	"model", "stream", "stream_options", "messages", "prompt", "input",
	"max_tokens", "max_completion_tokens", "max_output_tokens", "n",
	"response_format", "text", "tools", "tool_choice", "functions", "function_call", "instructions", "system",
}

const (
	fieldModel = iota
	fieldStream
	fieldStreamOptions
	fieldMessages
	fieldPrompt
	fieldInput
	fieldMaxTokens
	fieldMaxCompletionTokens
	fieldMaxOutputTokens
	fieldN
	fieldResponseFormat
	fieldText
	fieldTools
	fieldToolChoice
	fieldFunctions
	fieldFunctionCall
	fieldInstructions
	fieldSystem
)

// Scan validates a JSON body and reads its top-level fields in one
// pass. It reports false unless the body is one valid JSON object. A key
// is matched unescaped, so a model key spelled with escapes is a model
// key too.
func Scan(body []byte, watch ...string) (Request, bool) {
	f := Request{Watched: Watched{Watch: watch}}
	end, ok := jsonscan.ObjectFields(body, jsonscan.SkipSpace(body, 0), jsonscan.MaxNesting, f.read)
	return f, ok && jsonscan.SkipSpace(body, end) == len(body)
}

// read records one top-level field. raw is a valid JSON value at body
// offset at.
func (f *Request) read(key, raw []byte, at int) {
	if i := f.readField(key, raw, at); i >= 0 {
		if f.got.fields&(1<<i) != 0 && f.Repeated == "" {
			f.Repeated = readFields[i]
		}
		f.got.fields |= 1 << i
	}
	if len(f.Watch) > 0 {
		f.readWatched(key, raw)
	}
}

// readField reads a field the gateway reads (raw: its value, at: where
// it starts) and returns its index in readFields, or -1 for another.
func (f *Request) readField(key, raw []byte, at int) int {
	i := -1
	switch string(key) {
	case "model":
		i = fieldModel
		if f.Models == 0 {
			f.Model, f.ModelAt = raw, at
		}
		f.Models++
	case "stream":
		i = fieldStream
		f.Stream = f.boolean(raw, "stream")
	case "stream_options":
		i = fieldStreamOptions
		f.HasStreamOptions = true
		f.WantsUsage = false
		if raw[0] == '{' {
			f.streamOptions(raw)
		} else {
			f.typed(raw[0] == 'n', "stream_options")
		}
	case "messages":
		i = fieldMessages
		f.Messages = raw
		f.PromptBytes += len(raw)
	case "prompt":
		i = fieldPrompt
		f.Prompt = raw
		f.PromptBytes += len(raw)
	case "input":
		i = fieldInput
		f.Input = raw
		f.PromptBytes += len(raw)
	case "instructions":
		i = fieldInstructions
		f.PromptBytes += len(raw)
	case "system":
		// Anthropic's system prompt
		i = fieldSystem
		f.System = raw
		f.PromptBytes += len(raw)
	case "max_tokens":
		i = fieldMaxTokens
		f.MaxTokens = max(f.MaxTokens, f.integer(raw, "max_tokens"))
	case "max_completion_tokens":
		i = fieldMaxCompletionTokens
		f.MaxTokens = max(f.MaxTokens, f.integer(raw, "max_completion_tokens"))
	case "max_output_tokens":
		i = fieldMaxOutputTokens
		f.MaxTokens = max(f.MaxTokens, f.integer(raw, "max_output_tokens"))
	case "n":
		i = fieldN
		f.N = f.integer(raw, "n")
	case "response_format":
		i = fieldResponseFormat
		f.nested(raw, "type", "response_format.type", nil)
	case "text":
		// the Responses API's text.format.type
		i = fieldText
		var format []byte
		if f.nested(raw, "format", "text.format", &format) && format != nil {
			f.nested(format, "type", "text.format.type", nil)
		}
	case "tools":
		i = fieldTools
		f.PromptBytes += len(raw)
	case "tool_choice":
		i = fieldToolChoice
	case "functions":
		i = fieldFunctions
		f.PromptBytes += len(raw)
	case "function_call":
		i = fieldFunctionCall
	}
	return i
}

// readWatched notes a field route rules read.
// Gives reports whether the body gives the watched field, null or not.
func (f *Request) Gives(field string) bool {
	for i, w := range f.Watch {
		if w == field {
			return f.got.watched&(1<<i) != 0
		}
	}
	return false
}

func (f *Request) readWatched(key, raw []byte) {
	// a field given twice counts as upstream decoders read it: the last
	for i, w := range f.Watch {
		if string(key) == w {
			if f.got.watched&(1<<i) != 0 && f.Repeated == "" {
				f.Repeated = w
			}
			f.got.watched |= 1 << i
			if string(raw) == "null" {
				f.Present &^= 1 << i
			} else {
				f.Present |= 1 << i
			}
		}
	}
}

// typed notes field as mistyped unless ok.
func (f *Request) typed(ok bool, field string) {
	if !ok && f.Mistyped == "" {
		f.Mistyped = field
	}
}

// boolean reads a value that must be true, false or null (false).
func (f *Request) boolean(raw []byte, field string) bool {
	f.typed(raw[0] == 't' || raw[0] == 'f' || raw[0] == 'n', field)
	return raw[0] == 't'
}

// integer reads a value that must be a JSON integer or null (0): no
// fraction, no exponent, no string.
func (f *Request) integer(raw []byte, field string) int64 {
	if raw[0] == 'n' {
		return 0
	}
	f.typed(jsonInteger(raw), field)
	return jsonscan.Int(raw)
}

// jsonInteger reports whether a valid JSON value is an integer.
func jsonInteger(raw []byte) bool {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return false
	}
	for _, c := range raw[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// streamOptions reads the stream_options object: include_usage, and
// continuous_usage_stats (vLLM's), both booleans.
func (f *Request) streamOptions(raw []byte) {
	var usage, continuous int
	jsonscan.ObjectFields(raw, 0, jsonscan.MaxNesting, func(k, val []byte, _ int) {
		switch string(k) {
		case "include_usage":
			if usage++; usage == 2 && f.Repeated == "" {
				f.Repeated = "stream_options.include_usage"
			}
			f.WantsUsage = f.boolean(val, "stream_options.include_usage") // the last, as decoders read it
		case "continuous_usage_stats":
			if continuous++; continuous == 2 && f.Repeated == "" {
				f.Repeated = "stream_options.continuous_usage_stats"
			}
			f.boolean(val, "stream_options.continuous_usage_stats")
		}
	})
}

// nested reads the field name of an object value raw into v (if v is not
// nil), noting path as repeated when the object gives it twice. It
// reports false when raw is not an object.
func (f *Request) nested(raw []byte, name, path string, v *[]byte) bool {
	if raw[0] != '{' {
		return false
	}
	n := 0
	jsonscan.ObjectFields(raw, 0, jsonscan.MaxNesting, func(k, val []byte, _ int) {
		if string(k) == name {
			if n++; n == 2 && f.Repeated == "" {
				f.Repeated = path
			}
			if v != nil {
				*v = val // the last, as decoders read it
			}
		}
	})
	return true
}

// FieldType names the JSON type a field the gateway reads must have.
func FieldType(field string) string {
	switch field {
	case "stream_options":
		return "an object"
	case "max_tokens", "max_completion_tokens", "max_output_tokens", "n":
		return "an integer"
	}
	return "a boolean"
}

// modelString reports whether the model is a JSON string.
func (f *Request) ModelString() bool {
	return len(f.Model) > 0 && f.Model[0] == '"'
}

// modelName returns the model's name, unescaped.
func (f *Request) ModelName() string {
	return gjson.ParseBytes(f.Model).Str
}
