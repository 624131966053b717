// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// validObject is the reference scanTop must agree with: one JSON object,
// valid as encoding/json sees it.
func validObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return json.Valid(b) && len(t) > 0 && t[0] == '{'
}

func TestScanTopValidates(t *testing.T) {
	for _, body := range []string{
		`{}`, ` { } `, `{"model":"m"}`, "{\"a\":[1,-0.5e+3,true,false,null,{},[],\"\\u00e9\\n\"]}\n",
		`{"a":{"b":{"c":[[[]]]}},"model":"x"}`, `{"s":"` + strings.Repeat("0123456789abcdef", 100) + `"}`,
		`{"s":"é漢字 and \"quotes\" and \\ slashes \/"}`, `{"n":0,"m":-1.25E-7,"k":12e3}`,
		// rejected
		``, ` `, `[]`, `"x"`, `1`, `null`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":1}{}`,
		`{"a":[1,]}`, `{"a":[1 2]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":"x\q"}`, `{"a":"\u12g4"}`, "{\"a\":\"tab\there\"}",
		`{"a":"open}`, `{'a':1}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[}`, `{"a":{"b"}}`, `{"a":{"b":1]}`,
		`{"a":"` + strings.Repeat("x", 100) + `\`,
	} {
		_, ok := scanTop([]byte(body))
		if want := validObject([]byte(body)); ok != want {
			t.Errorf("%.60q: valid %v, want %v", body, ok, want)
		}
	}
}

// TestScanTopDeepNesting: nesting is refused past encoding/json's limit,
// without recursion: gjson's validator overflowed the goroutine stack (a
// fatal error, the whole server down) on a few MB of '['.
func TestScanTopDeepNesting(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(`{"model":"m","a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	for _, n := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		_, ok := scanTop(nest(n))
		if want := validObject(nest(n)); ok != want {
			t.Errorf("depth %d: valid %v, want %v", n+1, ok, want)
		}
	}
	if _, ok := scanTop(append([]byte(`{"a":`), bytes.Repeat([]byte("["), 8<<20)...)); ok {
		t.Error("8 MB of '[' accepted")
	}
}

func TestScanTopFields(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"hi, \"model\":\"no\""}], "model" : "chat-main",` +
		`"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"max_completion_tokens":128.0,` +
		`"prompt":"p","input":["i"],"metadata":{"model":"nested"}}`)
	f, ok := scanTop(body)
	if !ok {
		t.Fatal("valid body refused")
	}
	if f.modelName() != "chat-main" || f.models != 1 || string(body[f.modelAt:f.modelAt+len(f.model)]) != `"chat-main"` {
		t.Errorf("model %s at %d (%d)", f.model, f.modelAt, f.models)
	}
	if !f.stream || !f.hasStreamOptions || !f.wantsUsage || f.maxTokens != 128 {
		t.Errorf("stream %v options %v usage %v max_tokens %d", f.stream, f.hasStreamOptions, f.wantsUsage, f.maxTokens)
	}
	if string(f.prompt) != `"p"` || string(f.input) != `["i"]` || !gjson.ValidBytes(f.messages) {
		t.Errorf("prompt %s input %s messages %s", f.prompt, f.input, f.messages)
	}

	// a model key spelled with escapes is still a model key
	f, _ = scanTop([]byte(`{"model":"chat-main","mod\u0065l":"gpt-4o"}`))
	if f.models != 2 || f.modelName() != "chat-main" {
		t.Errorf("escaped duplicate: %d models, first %s", f.models, f.model)
	}
	f, _ = scanTop([]byte(`{"model":"chat\u002dmain"}`))
	g := &Gateway{aliases: map[string]*Alias{"chat-main": {name: "chat-main"}}}
	if al, ok := g.alias(&f); !ok || al.name != "chat-main" {
		t.Errorf("escaped value %s not found as chat-main", f.model)
	}
}

func FuzzScanTop(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[{"content":"x"}],"stream":false}`, `{"a":[1,{"b":null}]}`,
		`{"mod\u0065l":1}`, `{"a":"\ud800"}`, `{"x":-0.0e-0}`, `[1]`, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		top, ok := scanTop(b)
		if want := validObject(b); ok != want {
			t.Fatalf("%q: valid %v, want %v", b, ok, want)
		}
		if !ok || top.model == nil {
			return
		}
		// the model is where the swap will cut, and reads as gjson reads it
		if at := top.modelAt; at <= 0 || !gjson.ValidBytes(top.model) || !bytes.HasPrefix(b[at:], top.model) {
			t.Fatalf("%q: model %q not at %d", b, top.model, at)
		}
		if top.models == 1 && top.modelString() {
			if want := gjson.GetBytes(b, "model"); want.Exists() && want.Str != top.modelName() {
				t.Fatalf("%q: model %q, gjson reads %q", b, top.modelName(), want.Str)
			}
		}
	})
}
