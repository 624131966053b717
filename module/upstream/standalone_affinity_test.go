// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// In a plain reverse_proxy the policy reads the body for the key and the
// upstream still gets every byte; turns of one conversation share a key,
// a session header wins, a body of unknown length is left alone.
func TestStandaloneConversationKey(t *testing.T) {
	turn1 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"ticket 7"}]}`
	turn2 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"ticket 7"},{"role":"assistant","content":"ok"},{"role":"user","content":"and?"}]}`
	other := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"ticket 8"}]}`
	a := &AffinityConfig{SessionHeader: "X-Session-Id"}
	req := func(body string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", strings.NewReader(body))
		return r
	}
	keyOf := func(body string) uint64 {
		t.Helper()
		r := req(body)
		k := conversationKey(r, a)
		got, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if string(got) != body {
			t.Fatalf("the upstream would get %q, not %q", got, body)
		}
		return k
	}
	k1, k2, k3 := keyOf(turn1), keyOf(turn2), keyOf(other)
	if k1 == 0 || k1 != k2 || k1 == k3 {
		t.Errorf("keys: turn 1 %x, turn 2 %x, another conversation %x", k1, k2, k3)
	}
	r := req(turn1)
	r.Header.Set("X-Session-Id", "s-1")
	if k := conversationKey(r, a); k == k1 || k == 0 {
		t.Errorf("a named session keyed as its prompt: %x", k)
	}
	// a pick the proxy tries again finds the key and the body as they
	// were: not read, nor wrapped, again
	r = req(turn1)
	first := conversationKey(r, a)
	body1 := r.Body
	if again := conversationKey(r, a); again != first || r.Body != body1 {
		t.Errorf("a retried pick: key %x then %x, body rewrapped %v", first, again, r.Body != body1)
	}
	if got, _ := io.ReadAll(r.Body); string(got) != turn1 {
		t.Errorf("after a retried pick the upstream would get %q", got)
	}
	r = req(turn1)
	r.ContentLength = -1 // chunked: not read ahead
	body := r.Body
	if k := conversationKey(r, a); k != 0 || r.Body != body {
		t.Errorf("a body of unknown length was read: key %x", k)
	}
}
