// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"
)

func TestUpstreamOnlyHeaders(t *testing.T) {
	for _, k := range []string{"Server", "Openai-Organization", "Openai-Project", "Openai-Processing-Ms", "Openai-Version",
		"X-Ratelimit-Remaining-Tokens", "Set-Cookie", "Cf-Ray", "Cf-Cache-Status", "Via", "Alt-Svc", "Strict-Transport-Security",
		"X-Envoy-Upstream-Service-Time", "X-Kong-Upstream-Latency"} {
		if !upstreamOnly(k) {
			t.Errorf("%s reaches the client", k)
		}
	}
	for _, k := range []string{"Content-Type", "Content-Length", "Cache-Control", "Date", "Vary", "X-protocol.Request-Id", "Retry-After", "X", ""} {
		if upstreamOnly(k) {
			t.Errorf("%s is held back", k)
		}
	}
	p, err := NewHeaderPass([]string{"x-ratelimit-*", "SERVER"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.passes("X-Ratelimit-Limit-Requests") || !p.passes("Server") || p.passes("Set-Cookie") {
		t.Errorf("pass: %+v", p)
	}
	if all, _ := NewHeaderPass([]string{"*"}); !all.passes("Set-Cookie") {
		t.Error("* does not pass everything")
	}
}
