// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package caddyfile_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// validate does what `caddy validate` does with a Caddyfile: adapt it,
// then load and provision it without running it.
func validate(t *testing.T, caddyfile string) error {
	t.Helper()
	raw, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return err
	}
	return validateJSON(t, raw)
}

// validateJSON does what `caddy validate` does with a JSON config.
func validateJSON(t *testing.T, raw []byte) error {
	t.Helper()
	var cfg caddy.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return caddy.Validate(&cfg)
}

const validateSite = `{
	admin off
	storage file_system {TMP}
}
http://127.0.0.1:0 {
	hybrid_llm {
		group self {
			kind vllm
			proxy {UPSTREAM}
		}
		group cloud {
			kind openai
			api_key {KEY}
			proxy {UPSTREAM}
		}
		alias chat {
			target self qwen
			target cloud gpt-4o-mini
		}
	}
}
`

// Validating a config never touches its upstreams: no probe, no model
// check (they begin when a config runs).
func TestValidateDoesNotProbe(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	cfg := strings.NewReplacer("{TMP}", t.TempDir(), "{UPSTREAM}", up.Listener.Addr().String(), "{KEY}", "sk-test").Replace(validateSite)
	if err := validate(t, cfg); err != nil {
		t.Fatalf("validate: %v", err)
	}
	up.Close() // waits for any request that reached it
	if n := hits.Load(); n != 0 {
		t.Errorf("validating the config sent %d requests to its upstreams", n)
	}
}

// An api_key whose placeholder resolves to nothing fails validation,
// naming the placeholder; an explicit empty one means no credentials.
func TestValidateEmptyAPIKey(t *testing.T) {
	site := strings.NewReplacer("{TMP}", t.TempDir(), "{UPSTREAM}", "127.0.0.1:1").Replace(validateSite)
	err := validate(t, strings.Replace(site, "{KEY}", "{env.HYBRID_TEST_NEVER_SET}", 1))
	if err == nil || !strings.Contains(err.Error(), `api_key {env.HYBRID_TEST_NEVER_SET} resolves to an empty value: set it (is the environment variable exported?), or write api_key "" to send no credentials`) {
		t.Errorf("an unset variable: %v", err)
	}
	if err := validate(t, strings.Replace(site, "{KEY}", `""`, 1)); err != nil {
		t.Errorf(`api_key "": %v`, err)
	}
}

// A JSON config's vllm group without upstreams fails validation, as the
// Caddyfile's does at adapt: it would have nothing to send to.
func TestValidateVLLMGroupWithoutUpstreams(t *testing.T) {
	site := strings.NewReplacer("{TMP}", t.TempDir(), "{UPSTREAM}", "127.0.0.1:1", "{KEY}", "sk-test").Replace(validateSite)
	raw, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(site), nil)
	if err != nil {
		t.Fatal(err)
	}
	handler := ""
	gjson.GetBytes(raw, "apps.http.servers.srv0.routes.0.handle.0.routes.0.handle").ForEach(func(k, v gjson.Result) bool {
		if v.Get("handler").String() == "hybrid_llm" {
			handler = "apps.http.servers.srv0.routes.0.handle.0.routes.0.handle." + k.String()
		}
		return handler == ""
	})
	if handler == "" {
		t.Fatalf("no hybrid_llm handler in %s", raw)
	}
	raw, err = sjson.DeleteBytes(raw, handler+".groups.self.proxy.upstreams")
	if err != nil {
		t.Fatal(err)
	}
	if err := validateJSON(t, raw); err == nil || !strings.Contains(err.Error(), `group "self" of kind vllm has no upstream: give its vLLM servers' addresses (proxy.upstreams)`) {
		t.Errorf("validate: %v", err)
	}
}
