// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// Bad requests are answered by the gateway itself, in the OpenAI error
// shape, and nothing reaches an upstream.
func TestBadRequestsAreNotForwarded(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load("max_body_size 1KiB\n" + defaultGateway)

	big := `{"model":"chat-main","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	for _, tc := range []struct {
		name, body string
		chunked    bool
		status     int
		code       string
	}{
		{name: "malformed JSON", body: `{"model":"chat-main","messages":[`, status: 400, code: "invalid_json"},
		{name: "not an object", body: `["chat-main"]`, status: 400, code: "invalid_json"},
		{name: "empty body", body: ``, status: 400, code: "invalid_json"},
		{name: "model not a string", body: `{"model":42}`, status: 400, code: "invalid_type"},
		{name: "missing model", body: `{"messages":[]}`, status: 404, code: "model_not_found"},
		{name: "unknown alias", body: `{"model":"gpt-5-turbo","messages":[]}`, status: 404, code: "model_not_found"},
		{name: "upstream name is not an alias", body: `{"model":"` + selfModel + `","messages":[]}`, status: 404, code: "model_not_found"},
		{name: "over the cap", body: big, status: 413, code: "request_too_large"},
		{name: "over the cap, chunked", body: big, chunked: true, status: 413, code: "request_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				r = io.MultiReader(r) // hides the length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", r)
			req.Header.Set("Content-Type", "application/json")
			resp, body := do(t, req)
			wantError(t, resp, body, tc.status, tc.code)
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("error answers carry the request id too")
			}
		})
	}
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
		t.Errorf("upstreams got %d requests", n)
	}
}

// A body nested millions of levels deep is refused like any malformed
// one; it must not take the server down (a recursive validator overflows
// the goroutine stack, a fatal error no recover catches).
func TestDeeplyNestedBodyIsRefused(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	deep := `{"model":"chat-main","messages":` + strings.Repeat("[", 7<<20) + `]}`
	resp, body := post(t, "/v1/chat/completions", deep)
	wantError(t, resp, body, http.StatusBadRequest, "invalid_json")

	resp, body = post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the deep body: %d %s", resp.StatusCode, body)
	}
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 1 {
		t.Errorf("upstreams got %d requests, want only the good one", n)
	}
}

func TestUnknownAliasMessage(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	resp, body := post(t, "/v1/chat/completions", `{"model":"nope","messages":[]}`)
	got := wantError(t, resp, body, 404, "model_not_found")
	if got.Error.Message != "The model `nope` does not exist." || got.Error.Param == nil || *got.Error.Param != "model" {
		t.Errorf("error %+v", got.Error)
	}
}

func TestAllTargetsFailed(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	_ = e.selfSrv.Refuse()
	e.cloud.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})

	resp, body := post(t, "/v1/chat/completions", chatBody)
	got := wantError(t, resp, body, http.StatusBadGateway, "all_targets_failed")
	msg := got.Error.Message
	for _, want := range []string{"chat-main", "self (connection_refused)", "cloud (http_503)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	for _, secret := range []string{"127.0.0.1", e.selfSrv.Addr(), e.cloudSrv.Addr(), cloudKey} {
		if strings.Contains(string(body), secret) {
			t.Errorf("error body reveals %q: %s", secret, body)
		}
	}
	if resp.Header.Get("X-Hybrid-Target") != "" {
		t.Error("no target answered, yet X-Hybrid-Target is set")
	}
}

// When no target had an endpoint to offer, the answer is 503.
func TestNoTargetAvailable(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := withPlainSelf(defaultGateway, "{SELF} {\nunhealthy_request_count 1\n}") + `
alias self-only {
	target self ` + selfModel + `
}
`
	e.load(block)
	e.self.SetFailures(simulator.Failures{Stall: 20 * time.Second})
	go func() {
		c := &http.Client{Timeout: 3 * time.Second}
		if resp, err := c.Post(gateway+"/v1/chat/completions", "application/json", strings.NewReader(chatBody)); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the held request to reach self", func() bool { return len(e.selfPosts()) == 1 })

	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "self-only", 1))
	got := wantError(t, resp, body, http.StatusServiceUnavailable, "no_target_available")
	if !strings.Contains(got.Error.Message, "self (no_endpoint)") {
		t.Errorf("message %q", got.Error.Message)
	}
}

func TestDeadline(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load("deadline 300ms\n" + defaultGateway)
	e.self.SetFailures(simulator.Failures{Stall: 20 * time.Second})
	e.cloud.SetFailures(simulator.Failures{Stall: 20 * time.Second})

	resp, body := post(t, "/v1/chat/completions", chatBody)
	got := wantError(t, resp, body, http.StatusGatewayTimeout, "deadline_exceeded")
	if !strings.Contains(got.Error.Message, "self (deadline)") || !strings.Contains(got.Error.Message, "cloud (deadline)") {
		t.Errorf("message %q", got.Error.Message)
	}
}

func TestMethodsAndPaths(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)

	req, _ := http.NewRequest(http.MethodPut, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, body := do(t, req)
	wantError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
	if resp.Header.Get("Allow") == "" {
		t.Error("405 without Allow")
	}
	req, _ = http.NewRequest(http.MethodGet, gateway+"/v1/chat/completions", nil)
	resp, body = do(t, req)
	wantError(t, resp, body, http.StatusNotFound, "not_found")
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
		t.Errorf("upstreams got %d requests", n)
	}
}
