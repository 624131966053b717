// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/tidwall/gjson"
)

func TestPromptEstimate(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 50) + `"}]}`,
		`{"messages":[{"role":"user","content":"tab\t? no: tab\\t, quote \" \\\" é \u00e9 \\u00e9 \\u4e2d\\u6587 \\/"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"look at this"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","text":"no"}},"bare part"]}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"{\"content\":\"x\"}"}}]},{"role":"user"}]}`,
		`{"messages":[{"metadata":{"content":"nested, not counted"},"content":"first, not counted","content":"counted"}]}`,
		`{"prompt":"complete this sentence"}`, `{"prompt":["one","two",[1,2,3]]}`, `{"input":["embed me","and me"]}`,
		`{"messages":[],"prompt":12,"input":{"text":"an object is not text"}}`, `{"model":"m"}`,
		`{"input":[{"role":"user","content":"hello responses"},{"role":"user","content":[{"type":"input_text","text":"parts too"}]}]}`,
	} {
		b := []byte(strings.ReplaceAll(body, "\t", `\t`))
		top, ok := protocol.Scan(b)
		if !ok {
			t.Fatalf("invalid test body %s", b)
		}
		f := NewFeatures(b, nil, &top)
		if got, want := f.prompt(), promptRef(b); got != want {
			t.Errorf("%s: %d tokens, want %d", b, got, want)
		}
	}
}

// promptRef is the prompt estimate read with gjson, for reference.
func promptRef(body []byte) int {
	chars := 0
	var add func(r gjson.Result)
	add = func(r gjson.Result) {
		switch {
		case r.Type == gjson.String:
			chars += len(r.Str)
		case r.IsArray():
			r.ForEach(func(_, part gjson.Result) bool {
				if part.Type == gjson.String {
					chars += len(part.Str)
				} else if t := part.Get("text"); t.Type == gjson.String {
					chars += len(t.Str)
				} else if c := part.Get("content"); part.IsObject() && !c.IsObject() {
					add(c) // a Responses API input item
				}
				return true
			})
		}
	}
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		// a repeated content counts as decoders read it: the last
		var fields map[string]json.RawMessage
		_ = json.Unmarshal([]byte(m.Raw), &fields)
		add(gjson.ParseBytes(fields["content"]))
		return true
	})
	add(gjson.GetBytes(body, "prompt"))
	add(gjson.GetBytes(body, "input"))
	return (chars + 3) / 4
}
