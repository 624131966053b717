// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
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

// A path is forwarded as it resolves, never as sent: dot-segments, also
// percent-encoded ones, and doubled slashes are cleaned before the
// request reaches an upstream, so it cannot name a path outside the one
// the site's routes matched. Hop-by-hop headers a client sends (Upgrade,
// and the headers its Connection names) stay at the gateway.
func TestPathsAndHopHeadersAreNotPassedAsSent(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []*http.Request
	)
	up := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","model":"`+selfModel+`","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(withPlainSelf(defaultGateway, up.URL()))
	last := func() *http.Request {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return nil
		}
		return seen[len(seen)-1]
	}

	for _, target := range []string{
		"/_sim/failures/../../v1/chat/completions",
		"/v1/./chat/completions",
		"/v1/%2e%2e/v1/chat/completions",
		"/v1/%2E%2E/v1/%2e/chat/completions",
		"/v1//chat/completions",
		"/v1/chat//completions",
	} {
		before := len(e.selfPosts()) + len(e.cloudPosts())
		resp, body := rawPost(t, target, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", target, resp.StatusCode, body)
			continue
		}
		if r := last(); r == nil {
			t.Errorf("%s: nothing reached the upstream", target)
		} else if r.RequestURI != "/v1/chat/completions" {
			t.Errorf("%s: the upstream was asked for %s, want /v1/chat/completions", target, r.RequestURI)
		}
		mu.Lock()
		seen = seen[:0]
		mu.Unlock()
		if n := len(e.selfPosts()) + len(e.cloudPosts()) - before; n != 0 {
			t.Errorf("%s: %d requests reached another upstream", target, n)
		}
	}

	// a path that resolves to no endpoint the gateway serves reaches none
	resp, body := rawPost(t, "/v1/chat/completions/%2e%2e/%2e%2e/fine_tuning/jobs", "")
	wantError(t, resp, body, http.StatusNotFound, "not_found")
	if r := last(); r != nil {
		t.Errorf("a request for fine_tuning/jobs reached the upstream as %s", r.RequestURI)
	}

	// an upgrade asked of an inference POST goes no further
	resp, body = rawPost(t, "/v1/chat/completions",
		"Connection: Upgrade, X-Hop-Secret\r\nUpgrade: websocket\r\nX-Hop-Secret: s3cr3t\r\nKeep-Alive: timeout=5\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upgrade asked: %d %s", resp.StatusCode, body)
	}
	r := last()
	if r == nil {
		t.Fatal("nothing reached the upstream")
	}
	for _, h := range []string{"Upgrade", "X-Hop-Secret", "Keep-Alive"} {
		if v, ok := r.Header[h]; ok {
			t.Errorf("the upstream received %s: %q", h, v)
		}
	}
	if c := r.Header.Get("Connection"); strings.Contains(strings.ToLower(c), "upgrade") {
		t.Errorf("the upstream received Connection: %s", c)
	}
}

// rawPost sends a chat request to the gateway over a connection of its
// own, with the request target exactly as given (net/http's client
// would clean it) and extra header lines (each ending in CRLF).
func rawPost(t *testing.T, target, headers string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gateway, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		target, strings.TrimPrefix(gateway, "http://"), len(chatBody), headers, chatBody)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", target, err)
	}
	return resp, body
}
