// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/tidwall/gjson"
)

// topFields are the top-level fields the gateway reads of a request.
type topFields struct {
	model      []byte // the first model field's raw value, nil if none
	modelAt    int    // its offset in the body
	models     int    // how many model fields, whatever their spelling
	stream     bool
	wantsUsage bool // stream_options.include_usage

	hasStreamOptions bool

	// for pre-routing and context windows: the raw values, nil if absent
	messages, prompt, input []byte
	maxTokens               int64
	n                       int64 // choices asked for; 0 when not given

	watch   []string // rule fields to note
	present uint64   // bit i: watch[i] is present and not null
}

// scanTop validates a JSON body and reads its top-level fields in one
// pass. It reports false unless the body is one valid JSON object. A
// model key given twice (escapes included) is counted: decoders disagree
// on which one counts (gjson and sjson take the first, Go's and Python's
// decoders, vLLM's and a cloud's, the last).
func scanTop(body []byte, watch ...string) (topFields, bool) {
	f := topFields{watch: watch}
	end, ok := jsonscan.ObjectFields(body, jsonscan.SkipSpace(body, 0), jsonscan.MaxNesting, f.read)
	return f, ok && jsonscan.SkipSpace(body, end) == len(body)
}

// read records one top-level field. raw is a valid JSON value at body
// offset at.
func (f *topFields) read(key, raw []byte, at int) {
	switch string(key) {
	case "model":
		if f.models == 0 {
			f.model, f.modelAt = raw, at
		}
		f.models++
	case "stream":
		switch raw[0] {
		case 't', 'f':
			f.stream = raw[0] == 't'
		default: // lenient like gjson: "true", 1
			f.stream = gjson.ParseBytes(raw).Bool()
		}
	case "stream_options":
		f.hasStreamOptions = true
		f.wantsUsage = gjson.GetBytes(raw, "include_usage").Bool()
	case "messages":
		f.messages = raw
	case "prompt":
		f.prompt = raw
	case "input":
		f.input = raw
	case "n":
		f.n = jsonscan.Int(raw)
	case "max_tokens", "max_completion_tokens":
		f.maxTokens = max(f.maxTokens, jsonscan.Int(raw))
	}
	if len(f.watch) > 0 {
		// a field given twice counts as upstream decoders read it: the last
		for i, w := range f.watch {
			if string(key) == w {
				if string(raw) == "null" {
					f.present &^= 1 << i
				} else {
					f.present |= 1 << i
				}
			}
		}
	}
}

// modelString reports whether the model is a JSON string.
func (f *topFields) modelString() bool {
	return len(f.model) > 0 && f.model[0] == '"'
}

// modelName returns the model's name, unescaped.
func (f *topFields) modelName() string {
	return gjson.ParseBytes(f.model).Str
}
