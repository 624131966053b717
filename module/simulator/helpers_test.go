// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// start serves h on a loopback port for the duration of the test.
func start(t *testing.T, h http.Handler) *simulator.Server {
	t.Helper()
	srv, err := simulator.Start("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

type response struct {
	status int
	header http.Header
	body   string
	err    error // error reading the body
}

// do sends a request and reads the whole response.
func do(t *testing.T, ctx context.Context, method, url, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), err: rerr}
}

func post(t *testing.T, url, body string, header ...string) response {
	t.Helper()
	return do(t, context.Background(), http.MethodPost, url, body, header...)
}

func get(t *testing.T, url string, header ...string) response {
	t.Helper()
	return do(t, context.Background(), http.MethodGet, url, "", header...)
}

// expect checks status and, when body is not empty, the exact body.
func expect(t *testing.T, r response, status int, body string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("reading body: %v", r.err)
	}
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if body != "" && r.body != body {
		t.Fatalf("body mismatch\n got: %s\nwant: %s", r.body, body)
	}
}

// events splits an SSE body into its data payloads and checks the framing.
func events(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

var (
	idRE      = regexp.MustCompile(`"id":"(chatcmpl|cmpl|embd)-[0-9a-f]{32}"`)
	createdRE = regexp.MustCompile(`"created":\d+`)
)

// normalize replaces ids and timestamps with fixed values.
func normalize(s string) string {
	s = idRE.ReplaceAllString(s, `"id":"$1-ID"`)
	return createdRE.ReplaceAllString(s, `"created":0`)
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitLoad waits until v reports the given load.
func waitLoad(t *testing.T, v *simulator.VLLM, running, waiting int) {
	t.Helper()
	waitFor(t, "load", func() bool {
		r, w := v.Load()
		return r == running && w == waiting
	})
}

// background sends a request in a goroutine; the returned channel yields
// its response (status 0 and err set if the request failed).
func background(ctx context.Context, url, body string) <-chan response {
	ch := make(chan response, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
		if err != nil {
			ch <- response{err: err}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- response{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- response{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan response) response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("request did not finish")
		return response{}
	}
}

const chatBody = `{"model":"qwen2.5-7b-instruct","messages":[{"role":"user","content":"Hello, world!"}]}`
