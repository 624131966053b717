// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/jsonscan"
	"github.com/tidwall/gjson"
)

// validObject is the reference Scan must agree with: one JSON object,
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
		_, ok := Scan([]byte(body))
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
	for _, n := range []int{jsonscan.MaxNesting - 1, jsonscan.MaxNesting, jsonscan.MaxNesting + 1} {
		_, ok := Scan(nest(n))
		if want := validObject(nest(n)); ok != want {
			t.Errorf("depth %d: valid %v, want %v", n+1, ok, want)
		}
	}
	if _, ok := Scan(append([]byte(`{"a":`), bytes.Repeat([]byte("["), 8<<20)...)); ok {
		t.Error("8 MB of '[' accepted")
	}
}

func TestScanTopFields(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"hi, \"model\":\"no\""}], "model" : "chat-main",` +
		`"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"max_completion_tokens":128,` +
		`"prompt":"p","input":["i"],"metadata":{"model":"nested"}}`)
	f, ok := Scan(body)
	if !ok {
		t.Fatal("valid body refused")
	}
	if f.ModelName() != "chat-main" || f.Models != 1 || string(body[f.ModelAt:f.ModelAt+len(f.Model)]) != `"chat-main"` {
		t.Errorf("model %s at %d (%d)", f.Model, f.ModelAt, f.Models)
	}
	if !f.Stream || !f.HasStreamOptions || !f.WantsUsage || f.MaxTokens != 128 || f.Mistyped != "" {
		t.Errorf("stream %v options %v usage %v max_tokens %d", f.Stream, f.HasStreamOptions, f.WantsUsage, f.MaxTokens)
	}
	if string(f.Prompt) != `"p"` || string(f.Input) != `["i"]` || !gjson.ValidBytes(f.Messages) {
		t.Errorf("prompt %s input %s messages %s", f.Prompt, f.Input, f.Messages)
	}

	// a model key spelled with escapes is still a model key
	f, _ = Scan([]byte(`{"model":"chat-main","mod\u0065l":"gpt-4o"}`))
	if f.Models != 2 || f.ModelName() != "chat-main" {
		t.Errorf("escaped duplicate: %d models, first %s", f.Models, f.Model)
	}
}

// Every field the gateway reads, given twice, is reported by the name a
// refusal gives; other fields, and keys nested elsewhere, are not.
func TestScanTopRepeated(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","mod\u0065l":"x"}`, "model"},
		{`{"model":"m","stream":true,"stream":false}`, "stream"},
		{`{"model":"m","stream_options":{},"stream_options":{"include_usage":true}}`, "stream_options"},
		{`{"model":"m","stream_options":{"include_usage":true,"include_usage":false}}`, "stream_options.include_usage"},
		{`{"model":"m","stream_options":{"continuous_usage_stats":true,"continuous_usage_stats":false}}`, "stream_options.continuous_usage_stats"},
		{`{"model":"m","max_tokens":1,"max_tokens":9}`, "max_tokens"},
		{`{"model":"m","max_completion_tokens":1,"max_completion_tokens":9}`, "max_completion_tokens"},
		{`{"model":"m","max_output_tokens":1,"max_output_tokens":9}`, "max_output_tokens"},
		{`{"model":"m","n":1,"n":9}`, "n"},
		{`{"model":"m","messages":[],"messages":[]}`, "messages"},
		{`{"model":"m","response_format":{"type":"text","type":"json_schema"}}`, "response_format.type"},
		{`{"model":"m","text":{"format":{"type":"text","type":"json_schema"}}}`, "text.format.type"},
		{`{"model":"m","tools":[],"tools":[1]}`, "tools"},
		{`{"model":"m","x_rule":1,"x_rule":null}`, "x_rule"},
		{`{"model":"m","max_tokens":1,"max_completion_tokens":9,"temperature":1,"temperature":2}`, ""},
		{`{"model":"m","metadata":{"model":"a","model":"b"},"messages":[{"content":"a","content":"b"}]}`, ""},
		{`{"model":"m","stream_options":{"include_usage":true},"response_format":{"type":"json_object"}}`, ""},
	} {
		f, ok := Scan([]byte(tc.body), "x_rule")
		if !ok || f.Repeated != tc.want {
			t.Errorf("%s: repeated %q (valid %v), want %q", tc.body, f.Repeated, ok, tc.want)
		}
	}
	if f, _ := Scan([]byte(`{"stream_options":{"include_usage":true}}`)); !f.WantsUsage || !f.HasStreamOptions {
		t.Error("include_usage not read")
	}
}

// Every field the gateway reads for limits or streaming, given a value of
// another JSON type than the OpenAI API's (which vLLM's lax decoder reads
// as the gateway does not), is reported by the name a refusal gives.
func TestScanTopMistyped(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"max_tokens":" 5000"}`, "max_tokens"},
		{`{"max_tokens":"5000 "}`, "max_tokens"},
		{`{"max_tokens":"\t5000"}`, "max_tokens"},
		{`{"max_tokens":"5000\n"}`, "max_tokens"},
		{`{"max_tokens":"5000"}`, "max_tokens"},
		{`{"max_tokens":5000.0}`, "max_tokens"},
		{`{"max_tokens":5e3}`, "max_tokens"},
		{`{"max_tokens":true}`, "max_tokens"},
		{`{"max_completion_tokens":[5000]}`, "max_completion_tokens"},
		{`{"max_output_tokens":{"v":1}}`, "max_output_tokens"},
		{`{"n":" 3"}`, "n"},
		{`{"n":3.0}`, "n"},
		{`{"stream":"yes"}`, "stream"},
		{`{"stream":"on"}`, "stream"},
		{`{"stream":"y"}`, "stream"},
		{`{"stream":"true"}`, "stream"},
		{`{"stream":1}`, "stream"},
		{`{"stream_options":"x"}`, "stream_options"},
		{`{"stream_options":[]}`, "stream_options"},
		{`{"stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage"},
		{`{"stream_options":{"include_usage":1}}`, "stream_options.include_usage"},
		{`{"stream_options":{"continuous_usage_stats":"on"}}`, "stream_options.continuous_usage_stats"},
		{`{"n":"2","max_tokens":"9"}`, "n"},
		// the types the API defines, and null for absent
		{`{"max_tokens":5000,"max_completion_tokens":-1,"max_output_tokens":0,"n":3}`, ""},
		{`{"max_tokens":null,"n":null,"stream":null,"stream_options":null}`, ""},
		{`{"stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true}}`, ""},
		{`{"stream_options":{"include_usage":null,"other":"yes"},"temperature":"0.5","top_k":2.0}`, ""},
	} {
		f, ok := Scan([]byte(tc.body))
		if !ok || f.Mistyped != tc.want {
			t.Errorf("%s: mistyped %q (valid %v), want %q", tc.body, f.Mistyped, ok, tc.want)
		}
	}
	if f, _ := Scan([]byte(`{"stream":"yes","stream_options":{"include_usage":"yes"},"max_tokens":" 5"}`)); f.Stream || f.WantsUsage || f.MaxTokens != 0 {
		t.Errorf("mistyped values read: stream %v usage %v max_tokens %d", f.Stream, f.WantsUsage, f.MaxTokens)
	}
}

func FuzzScanTop(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[{"content":"x"}],"stream":false}`, `{"a":[1,{"b":null}]}`,
		`{"mod\u0065l":1}`, `{"a":"\ud800"}`, `{"x":-0.0e-0}`, `[1]`, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		top, ok := Scan(b)
		if want := validObject(b); ok != want {
			t.Fatalf("%q: valid %v, want %v", b, ok, want)
		}
		if !ok || top.Model == nil {
			return
		}
		// the model is where the swap will cut, and reads as gjson reads it
		if at := top.ModelAt; at <= 0 || !gjson.ValidBytes(top.Model) || !bytes.HasPrefix(b[at:], top.Model) {
			t.Fatalf("%q: model %q not at %d", b, top.Model, at)
		}
		if top.Models == 1 && top.ModelString() {
			if want := gjson.GetBytes(b, "model"); want.Exists() && want.Str != top.ModelName() {
				t.Fatalf("%q: model %q, gjson reads %q", b, top.ModelName(), want.Str)
			}
		}
	})
}
