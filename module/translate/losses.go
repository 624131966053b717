// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// carried are the top-level fields of a Messages request a chat request
// carries (or, for service_tier and a disabled thinking, that change no
// answer).
var carried = [...]string{"model", "messages", "system", "max_tokens", "stop_sequences", "stream", "temperature",
	"top_p", "top_k", "tools", "tool_choice", "metadata", "service_tier", "thinking"}

// Losses names the parts of Messages request body that a chat request
// cannot carry, each once, in the order met: "thinking" (extended
// thinking asked for, or thinking blocks in the history), "document",
// "image file" (an image by Files API id), a content block's (or a tool
// result's) or a tool's type that chat has no counterpart for, or a
// top-level field it does not know; and, unless the target speaks vLLM's
// dialect (vllm), top_k, more than 4 stop sequences and a last assistant
// message to continue (a prefill), which OpenAI refuses or answers anew. None: the translation
// is exact.
func Losses(body []byte, vllm bool) []string {
	var lost []string
	add := func(what string) {
		if !slices.Contains(lost, what) {
			lost = append(lost, strings.Clone(what)) // kept: not the body's bytes
		}
	}
	parse(body).ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		switch {
		case !slices.Contains(carried[:], key):
			add(key)
		case key == "top_k" && !vllm:
			add(key)
		case key == "stop_sequences" && !vllm && len(v.Array()) > maxStops:
			add("stop_sequences over 4")
		case key == "thinking" && v.Get("type").String() != "disabled":
			add("thinking")
		case key == "tools":
			v.ForEach(func(_, tool gjson.Result) bool {
				if typ := tool.Get("type").String(); typ != "" && typ != "custom" {
					add("tool " + typ)
				}
				return true
			})
		case key == "messages":
			last := ""
			v.ForEach(func(_, m gjson.Result) bool {
				blockLosses(m.Get("content"), add)
				last = m.Get("role").Str
				return true
			})
			if !vllm && last == "assistant" {
				add("assistant prefill") // OpenAI answers anew
			}
		}
		return true
	})
	return lost
}

// blockLosses adds what a message's content holds that chat cannot
// carry.
func blockLosses(content gjson.Result, add func(string)) {
	if !content.IsArray() {
		return
	}
	content.ForEach(func(_, b gjson.Result) bool {
		switch typ := b.Get("type").String(); typ {
		case "text", "tool_use":
		case "image":
			if !imageCarried(b) {
				add("image file")
			}
		case "tool_result":
			if !b.Get("content").IsArray() {
				return true
			}
			b.Get("content").ForEach(func(_, c gjson.Result) bool {
				switch c.Get("type").String() {
				case "text":
				case "image":
					if !imageCarried(c) {
						add("image file")
					}
				default:
					add("tool_result " + c.Get("type").String())
				}
				return true
			})
		case "thinking", "redacted_thinking":
			add("thinking")
		default:
			add(typ)
		}
		return true
	})
}

// imageCarried reports whether an image block is one chat takes: inline
// (base64) or by URL.
func imageCarried(b gjson.Result) bool {
	switch b.Get("source.type").String() {
	case "base64", "url":
		return true
	}
	return false
}

// maxStops is the most stop sequences OpenAI takes.
const maxStops = 4

// parse reads body in place: the results share its bytes rather than a
// copy (gjson.ParseBytes copies). A string kept past the call that read
// it must be cloned: the caller may reuse the bytes.
func parse(body []byte) gjson.Result {
	if len(body) == 0 {
		return gjson.Result{}
	}
	return gjson.Parse(unsafe.String(&body[0], len(body)))
}
