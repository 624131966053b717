// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"io"
	"strconv"
	"strings"
	"testing"
)

// agentRequest is a coding agent's turn as Claude Code sends it: a long
// system prompt in blocks, a dozen tools, twenty turns of text, tool
// calls and their results.
func agentRequest() []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"chat-main","max_tokens":32000,"stream":true,"metadata":{"user_id":"u"},"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"`)
	sb.WriteString(strings.Repeat("Follow the repository's conventions. ", 300))
	sb.WriteString(`","cache_control":{"type":"ephemeral"}}],"tools":[`)
	for i := range 12 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"name":"tool` + strconv.Itoa(i) + `","description":"` + strings.Repeat("Does a thing. ", 20) + `","input_schema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path"]}}`)
	}
	sb.WriteString(`],"messages":[`)
	for i := range 10 {
		if i > 0 {
			sb.WriteByte(',')
		}
		id := `"toolu_` + strconv.Itoa(i) + `"`
		sb.WriteString(`{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("please fix it ", 10) + `"}]},`)
		sb.WriteString(`{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":` + id + `,"name":"tool1","input":{"path":"main.go"}}]},`)
		sb.WriteString(`{"role":"user","content":[{"type":"tool_result","tool_use_id":` + id + `,"content":"` + strings.Repeat("package main\\n", 40) + `"}]}`)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

func BenchmarkToChat(b *testing.B) {
	body := agentRequest()
	o := Options{Model: []byte(`"qwen"`), VLLM: true}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if len(Losses(body, true)) > 0 {
			b.Fatal("losses")
		}
		if _, err := ToChat(body, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamChunk is the cost of one chat chunk of text turned into
// its event.
func BenchmarkStreamChunk(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"qwen","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	s := Stream{Model: []byte(`"chat-main"`)}
	_, _ = s.Pass(io.Discard, chunk)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Pass(io.Discard, chunk); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnswer(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-123","object":"chat.completion","created":1677652288,"model":"qwen","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("word ", 200) + `"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":200,"total_tokens":209}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Answer(answer, []byte(`"chat-main"`)); !ok {
			b.Fatal("not translated")
		}
	}
}
