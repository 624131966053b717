// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const streamBody = `{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"Say hello"}],"max_tokens":5}`

// The first chunk must reach the client while the upstream is still
// holding back the second: the gateway does not buffer streams.
func TestStreamIsFlushedChunkByChunk(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	release := make(chan struct{})
	gated, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"first"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"second"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer gated.Close()
	e.load(withPlainSelf(defaultGateway, gated.URL()))

	req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Fatalf("headers %v", resp.Header)
	}

	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.Contains(line, `"first"`) {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the first chunk did not reach the client while the upstream held the rest: the stream is buffered")
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), `"second"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("rest of stream %q", rest)
	}
}

// Through the gateway, a vLLM stream arrives event for event as vLLM sent
// it, with the usage chunk when the client asked for it.
func TestStreamPassesThroughUnchanged(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: 2 * time.Millisecond}, simulator.CloudConfig{})
	e.load(defaultGateway)

	body := strings.Replace(streamBody, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
	resp, got := post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	direct, err := http.Post(e.selfSrv.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(strings.Replace(body, "chat-main", selfModel, 1)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(direct.Body)
	direct.Body.Close()

	// the same events, with the alias for the model name
	ge, we := sseEvents(got), sseEvents(bytes.ReplaceAll(want, []byte(`"model":"`+selfModel+`"`), []byte(`"model":"chat-main"`)))
	if len(ge) != len(we) || len(ge) < 3 {
		t.Fatalf("gateway sent %d events, vLLM %d", len(ge), len(we))
	}
	if ge[len(ge)-1] != "[DONE]" || !strings.Contains(ge[len(ge)-2], `"usage":{`) {
		t.Errorf("stream end: %q %q", ge[len(ge)-2], ge[len(ge)-1])
	}
	for i := range ge {
		// ids and timestamps differ between the two requests; the
		// shape and content must not
		if shape(ge[i]) != shape(we[i]) {
			t.Errorf("event %d:\n gateway %s\n vllm    %s", i, ge[i], we[i])
		}
	}
}

// shape blanks the per-request id and created fields of a chunk.
func shape(event string) string {
	out := event
	for _, k := range []string{`"id":"`, `"created":`} {
		i := strings.Index(out, k)
		if i < 0 {
			continue
		}
		j := i + len(k)
		for j < len(out) && out[j] != '"' && out[j] != ',' {
			j++
		}
		out = out[:i+len(k)] + out[j:]
	}
	return out
}

// An upstream that dies after the first byte cannot be replaced by the
// next target; the client gets an SSE error event and no [DONE].
func TestStreamCutMidWayEndsWithErrorEvent(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	e.self.SetFailures(simulator.Failures{CutAfterChunks: 3})

	resp, body := post(t, "/v1/chat/completions", streamBody)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	events := sseEvents(body)
	if len(events) != 4 {
		t.Fatalf("want 3 chunks and an error event, got %d: %q", len(events), events)
	}
	for _, ev := range events[:3] {
		if !strings.Contains(ev, `"chat.completion.chunk"`) {
			t.Errorf("chunk %q", ev)
		}
	}
	last := events[3]
	if !strings.HasPrefix(last, `{"error":{"message":`) || !strings.Contains(last, `"code":"stream_interrupted"`) {
		t.Errorf("last event %q", last)
	}
	if strings.Contains(string(body), "[DONE]") {
		t.Error("a cut stream must not end with [DONE]")
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("cloud got %d requests after the first byte", n)
	}
}

// A non-streamed body cut mid-way is aborted, never passed off as whole.
func TestBodyCutMidWayIsAborted(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	e.self.SetFailures(simulator.Failures{CutAfterChunks: 1})

	req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return // aborted before the headers: fine too
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the cut body was read without an error")
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("cloud got %d requests after the first byte", n)
	}
}
