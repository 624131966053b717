// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// A chat stream whose upstream closes it cleanly before any chunk with a
// finish_reason was cut short all the same: the client gets the error
// event as the stream's last, never a [DONE] before or after it, and the
// request counts as interrupted. An upstream's own error event (vLLM's,
// in either of its shapes) is told in the gateway's event, with the alias
// for the served model name.
func TestStreamEndingBeforeFinishIsInterrupted(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	for _, tail := range []string{"", "data: [DONE]\n\n",
		`data: {"error":{"message":"engine dead for ` + selfModel + `","type":"InternalServerError","param":null,"code":500}}` + "\r\n\r\ndata: [DONE]\r\n\r\n",
		`data: {"object":"error","message":"engine dead for ` + selfModel + `","type":"InternalServerError","param":null,"code":500}` + "\n\ndata: [DONE]\n\n",
	} {
		upstream, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]}`+"\n\n"+tail)
		}))
		if err != nil {
			t.Fatal(err)
		}
		e.load(withPlainSelf(defaultGateway, upstream.URL()))
		labels := map[string]string{"gateway": e.gatewayName(), "alias": "chat-main", "group": "self", "outcome": "interrupted"}
		interrupted0 := metricValue(t, "caddy_hybrid_llm_requests_total", labels)
		resp, body := post(t, "/v1/chat/completions", streamBody)
		events := sseEvents(body)
		if resp.StatusCode != http.StatusOK || len(events) == 0 || !strings.Contains(events[len(events)-1], `"code":"stream_interrupted"`) ||
			slices.Contains(events, "[DONE]") || strings.Contains(string(body), selfModel) {
			t.Errorf("tail %q: %d %q", tail, resp.StatusCode, events)
		}
		if strings.Contains(tail, "engine dead") && (len(events) != 2 || !strings.Contains(events[1], `"the upstream failed mid-stream: engine dead for chat-main"`)) {
			t.Errorf("tail %q: the upstream's error was not told in the gateway's event: %q", tail, events)
		}
		if got := e.accessLog(resp.Header.Get("X-Request-Id"))["llm_outcome"]; got != "interrupted" {
			t.Errorf("tail %q: access log llm_outcome %v", tail, got)
		}
		waitFor(t, "the interrupted request's metrics", func() bool {
			return metricValue(t, "caddy_hybrid_llm_requests_total", labels) == interrupted0+1
		})
		_ = upstream.Close()
	}
}

// A client that leaves in the middle of a stream is no fault of the
// upstream: the request is client_canceled, not interrupted, and the
// upstream's breaker does not hear of it.
func TestClientLeavingMidStreamIsClientCanceled(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: 20 * time.Millisecond}, simulator.CloudConfig{})
	e.load(withBreaker(defaultGateway, "self", "\t\tallowed_fails 1\n\t\tcooldown 1h\n"))
	gw := e.gatewayName()
	requests := func(outcome string) float64 {
		return metricValue(t, "caddy_hybrid_llm_requests_total", map[string]string{"gateway": gw, "alias": "chat-main", "outcome": outcome})
	}
	opened := func() float64 {
		return metricValue(t, "caddy_hybrid_llm_breaker_opened_total", map[string]string{"gateway": gw, "group": "self"})
	}
	canceled0, interrupted0, upstream0, opened0 := requests("client_canceled"), requests("interrupted"), requests("upstream_error"), opened()
	long := strings.Replace(streamBody, `"max_tokens":5`, `"max_tokens":2000`, 1)
	const leaving = 3
	for range leaving {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(long))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("first event: %q %v", line, err)
		}
		cancel() // the client leaves
		_ = resp.Body.Close()
	}
	waitFor(t, "the canceled requests' metrics", func() bool { return requests("client_canceled") == canceled0+leaving })
	if d := requests("interrupted") - interrupted0; d != 0 {
		t.Errorf("%v requests counted as interrupted", d)
	}
	if d := requests("upstream_error") - upstream0; d != 0 {
		t.Errorf("%v requests counted as upstream errors", d)
	}
	if d := opened() - opened0; d != 0 {
		t.Errorf("the self breaker opened %v times", d)
	}
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("after the clients left: %d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
}

// A client that leaves before the first byte leaves no failed attempt
// behind: nothing is counted as a fallback, and the request is
// client_canceled.
func TestClientLeavingBeforeTheAnswer(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	gw := e.gatewayName()
	e.self.SetFailures(simulator.Failures{Stall: time.Hour}) // probes still pass
	counted := func() (fallbacks, canceled float64) {
		return metricValue(t, "caddy_hybrid_llm_fallbacks_total", map[string]string{"gateway": gw, "alias": "chat-main"}),
			metricValue(t, "caddy_hybrid_llm_requests_total", map[string]string{"gateway": gw, "alias": "chat-main", "outcome": "client_canceled"})
	}
	fallbacks0, canceled0 := counted()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the request at the upstream", func() bool { return len(e.selfPosts()) > 0 })
	cancel() // the client leaves
	if err := <-done; err == nil {
		t.Fatal("the request was answered")
	}
	waitFor(t, "the canceled request's metrics", func() bool {
		_, canceled := counted()
		return canceled == canceled0+1
	})
	if fallbacks, _ := counted(); fallbacks != fallbacks0 {
		t.Errorf("%v fallbacks counted for a client that left", fallbacks-fallbacks0)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("the cloud got %d requests", n)
	}
}
