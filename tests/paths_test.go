// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"net/http"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/examples/simulator"
)

// Only the OpenAI endpoints the gateway reads are forwarded; any other
// POST under the handler is answered 404 in the OpenAI shape and reaches
// no upstream. `paths` names others.
func TestOnlyKnownEndpointsAreForwarded(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	for _, path := range []string{"/v1/audio/speech", "/v1/rerank", "/v1/fine_tuning/jobs", "/v1/chat/completions/extra"} {
		before := len(e.selfPosts()) + len(e.cloudPosts())
		resp, body := post(t, path, chatBody)
		wantError(t, resp, body, http.StatusNotFound, "not_found")
		if n := len(e.selfPosts()) + len(e.cloudPosts()) - before; n != 0 {
			t.Errorf("%s: %d requests forwarded", path, n)
		}
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings"} {
		if resp, body := post(t, path, chatBody); resp.StatusCode == http.StatusNotFound {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}

	// a config that adds an endpoint forwards it
	e.load("paths chat/completions rerank\n" + defaultGateway)
	before := len(e.selfPosts())
	post(t, "/v1/rerank", chatBody)
	if n := len(e.selfPosts()) - before; n != 1 {
		t.Errorf("rerank with paths: %d requests forwarded", n)
	}
	resp, body := post(t, "/v1/embeddings", chatBody)
	wantError(t, resp, body, http.StatusNotFound, "not_found")
}
