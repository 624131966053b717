// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// framedStandIn answers every request with a stream framed with eol: a
// keep-alive comment and a first chunk at once, the rest (the finish, the
// usage chunk when asked for, [DONE]) once release is closed.
func framedStandIn(t *testing.T, eol string, release <-chan struct{}) string {
	t.Helper()
	srv, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		usage := strings.Contains(string(b), `"include_usage":true`)
		frame := func(s string) string { return strings.ReplaceAll(s, "\n", eol) }
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, frame(": keep-alive\n\n"+
			`data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}`+"\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		rest := `data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
		if usage {
			rest += `data: {"id":"1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}` + "\n\n"
		}
		fmt.Fprint(w, frame(rest+"data: [DONE]\n\n"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.URL()
}

// Lines of an event stream may end in "\r\n" or "\r" as well as "\n":
// whatever the framing, with stream usage on (the default), each event
// reaches the client as the upstream sends it, the usage chunk the
// gateway asked for is counted and kept from the client.
func TestStreamFramingsFlowAndAreMetered(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	gw := e.gatewayName()
	for _, eol := range []string{"\r\n", "\r"} {
		release := make(chan struct{})
		e.load(withPlainSelf(defaultGateway, framedStandIn(t, eol, release)))
		completion := func() float64 {
			return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "self", "kind": "completion"})
		}
		completion0 := completion()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(streamBody))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		var first strings.Builder
		for !strings.Contains(first.String(), "first") {
			b, err := br.ReadByte()
			if err != nil {
				t.Fatalf("%q: the first event did not arrive while the upstream held the rest: %q %v", eol, first.String(), err)
			}
			first.WriteByte(b)
		}
		close(release)
		rest, err := io.ReadAll(br)
		_ = resp.Body.Close()
		cancel()
		body := first.String() + string(rest)
		if err != nil || strings.Contains(body, `"usage"`) || !strings.HasSuffix(body, "data: [DONE]"+eol+eol) {
			t.Errorf("%q: stream %q %v", eol, body, err)
		}
		if got := completion() - completion0; got != 2 {
			t.Errorf("%q: %v completion tokens counted, want 2", eol, got)
		}
	}
}

// A cloud that frames its streams with "\r\n" is counted like any other.
func TestCRLFCloudStreamIsCounted(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{SSELineEnding: "\r\n"})
	e.load(defaultGateway)
	completion := func() float64 {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": e.gatewayName(), "group": "cloud", "kind": "completion"})
	}
	completion0 := completion()
	resp, body := post(t, "/v1/chat/completions", strings.Replace(streamBody, "chat-main", "cloud-first", 1))
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"usage"`) || !strings.HasSuffix(string(body), "data: [DONE]\r\n\r\n") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if got := completion() - completion0; got != 5 {
		t.Errorf("%v completion tokens counted, want 5", got)
	}
}

// stream_usage is a group's choice: a group with it off never gets
// stream_options it did not send, another group still does.
func TestStreamUsagePerGroup(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "\tkind vllm\n", "\tkind vllm\n\tstream_usage off\n", 1))
	for _, tc := range []struct {
		alias string
		sent  func() []simulator.RecordedRequest
		asked bool
	}{
		{"chat-main", e.selfPosts, false},
		{"cloud-first", e.cloudPosts, true},
	} {
		resp, body := post(t, "/v1/chat/completions", strings.Replace(streamBody, "chat-main", tc.alias, 1))
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"usage"`) {
			t.Fatalf("%s: %d %s", tc.alias, resp.StatusCode, body)
		}
		reqs := tc.sent()
		if got := strings.Contains(string(reqs[len(reqs)-1].Body), "stream_options"); got != tc.asked {
			t.Errorf("%s: upstream asked for stream usage: %v, want %v: %s", tc.alias, got, tc.asked, reqs[len(reqs)-1].Body)
		}
	}
}
