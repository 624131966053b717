// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

func TestPresentedKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  http.Header
		key     string
		refused bool
	}{
		{"bearer", http.Header{"Authorization": {"Bearer sk-1"}}, "sk-1", false},
		{"bearer, any case", http.Header{"Authorization": {"bearer sk-1"}}, "sk-1", false},
		{"api-key", http.Header{"Api-Key": {"sk-1"}}, "sk-1", false},
		{"x-api-key", http.Header{"X-Api-Key": {" sk-1 "}}, "sk-1", false},
		{"same key twice", http.Header{"Authorization": {"Bearer sk-1"}, "Api-Key": {"sk-1"}}, "sk-1", false},
		{"none", http.Header{}, "", true},
		{"basic", http.Header{"Authorization": {"Basic c2stMQ=="}}, "", true},
		{"bearer without key", http.Header{"Authorization": {"Bearer "}}, "", true},
		{"two authorization headers", http.Header{"Authorization": {"Bearer sk-1", "Bearer sk-1"}}, "", true},
		{"empty api-key", http.Header{"Api-Key": {""}}, "", true},
		{"two keys", http.Header{"Authorization": {"Bearer sk-1"}, "X-Api-Key": {"sk-2"}}, "", true},
		{"too long", http.Header{"Api-Key": {strings.Repeat("k", MaxKeyLength+1)}}, "", true},
	} {
		key, problem := Presented(tc.header)
		if key != tc.key || (problem != "") != tc.refused {
			t.Errorf("%s: key %q, problem %q", tc.name, key, problem)
		}
	}
}

// Keys from the environment are name=key pairs separated by spaces; a
// list written with commas is refused rather than read as one client
// whose key holds the rest.
func TestWithKeys(t *testing.T) {
	configured := map[string]*Client{"team-a": {}}
	got, err := WithKeys(configured, " team-a=sk-a  team-b=sk-b\n")
	if err != nil || len(got) != 2 || got["team-a"].Key != "sk-a" || got["team-b"].Key != "sk-b" || configured["team-a"].Key != "" {
		t.Fatalf("%v %v", got, err)
	}
	for _, tc := range []struct{ pairs, says string }{
		{"team-a=sk-a,team-b=sk-b", `client "team-a": its key holds another name=key pair: separate the pairs with spaces`},
		{"team-a=sk-a;team-b=sk-b", "separate the pairs with spaces"},
		{"sk-alone", "want name=key pairs separated by spaces"},
		{"=sk", "want name=key pairs"},
	} {
		if _, err := WithKeys(nil, tc.pairs); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want an error saying %q", tc.pairs, err, tc.says)
		}
	}
}

func TestCeilings(t *testing.T) {
	clamp := Ceilings{MaxTokens: 100, MaxN: 2}
	refuse := Ceilings{MaxTokens: 100, Mode: Refuse}
	for _, tc := range []struct {
		name      string
		c         Ceilings
		path      string
		body      string
		want      string // the body sent, or the refused param after "refused:"
		unchanged bool
	}{
		{"under", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":50}`, `{"model":"m","max_tokens":50}`, true},
		{"over, clamped", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":5000}`, `{"model":"m","max_tokens":100}`, false},
		{"new field, clamped", clamp, "/v1/chat/completions", `{"model":"m","max_completion_tokens":5000}`, `{"model":"m","max_completion_tokens":100}`, false},
		{"none, set", clamp, "/v1/chat/completions", `{"model":"m"}`, `{"model":"m","max_completion_tokens":100}`, false},
		{"null, set", clamp, "/v1/completions", `{"model":"m","max_tokens":null}`, `{"model":"m","max_tokens":100}`, false},
		{"responses", clamp, "/v1/responses", `{"model":"m","max_output_tokens":101}`, `{"model":"m","max_output_tokens":100}`, false},
		{"embeddings: no length", clamp, "/v1/embeddings", `{"model":"m","input":"x"}`, `{"model":"m","input":"x"}`, true},
		{"over, refused", refuse, "/v1/chat/completions", `{"model":"m","max_tokens":101}`, "refused:max_tokens", false},
		{"twice", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":1,"max_tokens":5000}`, "refused:max_tokens", false},
		{"n over", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":1,"n":3}`, "refused:n", false},
		{"n under", clamp, "/v1/chat/completions", `{"model":"m","max_tokens":1,"n":2}`, `{"model":"m","max_tokens":1,"n":2}`, true},
	} {
		out, refusal := tc.c.Apply([]byte(tc.body), protocol.ForPath(tc.path))
		switch {
		case refusal != nil:
			if "refused:"+refusal.Param != tc.want {
				t.Errorf("%s: refused on %s (%s)", tc.name, refusal.Param, refusal.Msg)
			}
		case string(out) != tc.want:
			t.Errorf("%s: %s, want %s", tc.name, out, tc.want)
		case tc.unchanged && &out[0] != &[]byte(tc.body)[0] && string(out) != tc.body:
			t.Errorf("%s: changed", tc.name)
		}
	}
}

// A configured key is a placeholder read at provisioning or a SHA-256; a
// key with spaces, empty or too long is refused with a reason that never
// repeats it.
func TestParseKey(t *testing.T) {
	t.Setenv("HYBRID_TEST_KEY", "sk-from-env")
	repl := caddy.NewReplacer()
	h, err := ParseKey(repl, "{env.HYBRID_TEST_KEY}")
	if err != nil || h != HashOf("sk-from-env") {
		t.Fatalf("placeholder: %x %v", h, err)
	}
	sum := sha256.Sum256([]byte("sk-hashed"))
	if h, err := ParseKey(repl, "sha256:"+hex.EncodeToString(sum[:])); err != nil || h != HashOf("sk-hashed") {
		t.Fatalf("sha256: %x %v", h, err)
	}
	t.Setenv("HYBRID_TEST_SPACED", "sk with space")
	t.Setenv("HYBRID_TEST_LONG", strings.Repeat("k", MaxKeyLength+1))
	for key, says := range map[string]string{
		"sha256:abc":               "64 hex digits",
		"{env.HYBRID_TEST_UNSET}":  "is empty",
		"{env.HYBRID_TEST_SPACED}": "has spaces",
		"{env.HYBRID_TEST_LONG}":   "longer than",
	} {
		_, err := ParseKey(repl, key)
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "sk with") {
			t.Errorf("%s: %v, want an error saying %q", key, err, says)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Client
		says string
	}{
		{Client{RPM: -1}, "rpm and tpm"},
		{Client{BudgetDayUSD: -1}, "budgets"},
		{Client{MaxN: -1}, "max_tokens and max_n"},
		{Client{MaxTokensMode: "cut"}, `max_tokens_mode must be "clamp" or "refuse"`},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.says)
		}
	}
	if err := (&Client{RPM: 60, MaxTokens: 100, MaxTokensMode: Refuse}).Validate(); err != nil {
		t.Errorf("a valid client: %v", err)
	}
	for name, ok := range map[string]bool{"team-a": true, "": false, " team-a": false, "team-a\n": false} {
		if err := ValidName(name); (err == nil) != ok {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for s, ok := range map[string]bool{"{env.K}": true, "{env.K}x": false, "{a}{b}": false, "sk-1": false, "{}": false} {
		if IsPlaceholder(s) != ok {
			t.Errorf("IsPlaceholder(%q) = %v", s, !ok)
		}
	}
}
