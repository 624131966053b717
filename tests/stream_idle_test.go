// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// frozenChunks is how many chunks a frozen upstream sends before it
// stops.
const frozenChunks = 3

// freezing is an upstream's chat completions that send frozenChunks
// chunks of a stream (framed with \r\n, as some servers do), or half of a
// JSON answer, and then freeze as a SIGSTOPped vLLM does: the connection
// stays open and nothing more comes, until the gateway gives up on it or
// the test ends (thaw).
func freezing(thaw <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range frozenChunks {
				fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"%s","choices":[{"index":0,"delta":{"content":"w%d "},"finish_reason":null}]}`+"\r\n\r\n", selfModel, i)
			}
		} else {
			answer := `{"id":"c","object":"chat.completion","created":1,"model":"` + selfModel + `","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
			_, _ = io.WriteString(w, answer[:len(answer)/2])
		}
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-thaw:
		}
	}
}

// frozenUpstream starts a freezing upstream that thaws when the test ends;
// next, if set, answers every other path (a vLLM's probes).
func frozenUpstream(t *testing.T, next http.Handler) *simulator.Server {
	t.Helper()
	thaw := make(chan struct{})
	freeze := freezing(thaw)
	up := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		if next != nil && r.URL.Path != "/v1/chat/completions" {
			next.ServeHTTP(w, r)
			return
		}
		freeze(w, r)
	})
	t.Cleanup(func() { close(thaw) }) // before the server closes
	return up
}

// streamUntilCut reads a chat stream from the gateway with the OpenAI SDK
// and returns the chunks it got and how the stream ended; before the
// chunks' end, after the first frozenChunks, it calls then, if set. The
// context only bounds a gateway that never ends the stream.
func streamUntilCut(t *testing.T, then func()) (int, *http.Response, error) {
	t.Helper()
	var last *http.Response
	sdk := sdkClient("k", &last)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := sdk.Chat.Completions.NewStreaming(ctx, chatParams())
	defer stream.Close()
	n := 0
	for stream.Next() {
		if n++; n == frozenChunks && then != nil {
			then()
		}
	}
	return n, last, stream.Err()
}

// wantCut checks that a stream got every chunk the upstream sent, then
// the gateway's stream_interrupted error event with the cause, and that
// the access log says so.
func (e *env) wantCut(n int, last *http.Response, err error, cause string) {
	e.t.Helper()
	if n != frozenChunks || err == nil || !strings.Contains(err.Error(), `"stream_interrupted"`) || !strings.Contains(err.Error(), cause) {
		e.t.Fatalf("%d chunks, then %v; want %d, then stream_interrupted: %s", n, err, frozenChunks, cause)
	}
	e.wantInterrupted(last, cause)
}

// wantInterrupted checks that the access log says the answer was
// interrupted, and why.
func (e *env) wantInterrupted(resp *http.Response, cause string) {
	e.t.Helper()
	entry := e.accessLog(resp.Header.Get("X-Request-Id"))
	if entry["llm_outcome"] != "interrupted" || entry["llm_interrupt_cause"] != cause {
		e.t.Errorf("access log: llm_outcome %v, llm_interrupt_cause %v", entry["llm_outcome"], entry["llm_interrupt_cause"])
	}
}

// An upstream that freezes in the middle of a stream (a SIGSTOPped vLLM:
// the connection stays open, nothing comes) is cut once it has sent
// nothing for the target's idle_timeout: the client gets the chunks, then
// the stream_interrupted error event, and the upstream's breaker counts a
// failure. A non-stream answer that freezes half-way is aborted, never
// passed off as whole.
func TestFrozenUpstreamIsCutWhenIdle(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	up := frozenUpstream(t, nil)
	block := strings.Replace(withPlainSelf(defaultGateway, up.URL()),
		"\ttarget self "+selfModel+"\n", "\ttarget self "+selfModel+" {\n\t\tidle_timeout 300ms\n\t}\n", 1)
	const cause = "the upstream sent nothing for 300ms"

	t.Run("stream", func(t *testing.T) {
		e.load(withBreaker(block, "self", "\t\tallowed_fails 1\n\t\tcooldown 1h\n"))
		opened := func() float64 {
			return metricValue(t, "caddy_hybrid_llm_breaker_opened_total", map[string]string{"gateway": e.gatewayName(), "group": "self"})
		}
		opened0 := opened()
		n, last, err := streamUntilCut(t, nil)
		e.wantCut(n, last, err, cause)
		waitFor(t, "the self breaker to open", func() bool { return opened() == opened0+1 })
	})

	t.Run("non-stream", func(t *testing.T) {
		e.load(block)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if body, err := io.ReadAll(resp.Body); err == nil || ctx.Err() != nil {
			t.Fatalf("the half answer was not aborted: %v (%s)", err, body)
		}
		e.wantInterrupted(resp, cause)
	})
}

// A stream from a vLLM endpoint that freezes ends as soon as the health
// probes mark the endpoint down, with no idle_timeout to wait for: the
// client gets the chunks, then the stream_interrupted error event; the
// request's span says why too.
func TestStreamEndsWhenItsEndpointIsMarkedDown(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	up := frozenUpstream(t, e.self) // the simulator answers the probes
	block := strings.Replace(vllmBlock("\tprobe {\n\t\thealth_interval 50ms\n\t}\n"), "proxy {SELF}", "proxy "+up.URL(), 1)
	block = strings.Replace(block, "\ttarget self "+selfModel+"\n", "\ttarget self "+selfModel+" {\n\t\tidle_timeout off\n\t}\n", 1)
	e.loadSite(block, "", "test_request_span")
	const cause = "the endpoint was marked down (its health probes failed)"
	before := len(testSpans.Ended())
	n, last, err := streamUntilCut(t, func() { e.self.SetHealthy(false) })
	e.wantCut(n, last, err, cause)
	if last.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("answered by %q", last.Header.Get("X-Hybrid-Target"))
	}
	waitFor(t, "the request's span with the cause", func() bool {
		for _, s := range testSpans.Ended()[before:] {
			if s.Name() == "handler" && spanAttrs(s)["hybrid_llm.interrupt_cause"].AsString() == cause {
				return true
			}
		}
		return false
	})
}
