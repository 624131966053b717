// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// benchHandler measures one zero-latency request without the network.
func benchHandler(b *testing.B, h http.Handler, body string) {
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

func BenchmarkVLLMChat(b *testing.B) {
	benchHandler(b, simulator.NewVLLM(simulator.VLLMConfig{DisableRecording: true}), chatBody)
}

func BenchmarkVLLMChatStream(b *testing.B) {
	benchHandler(b, simulator.NewVLLM(simulator.VLLMConfig{DisableRecording: true}),
		`{"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello, world!"}]}`)
}

func BenchmarkCloudChatStream(b *testing.B) {
	benchHandler(b, simulator.NewCloud(simulator.CloudConfig{DisableRecording: true}),
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Hello, world!"}]}`)
}
