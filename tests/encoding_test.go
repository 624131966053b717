// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// withCloudCost gives the cloud group of a block prices, so that its
// answers are priced.
func withCloudCost(block string) string {
	return strings.Replace(block, "\tapi_key "+cloudKey+"\n",
		"\tapi_key "+cloudKey+"\n\tcost {\n\t\tinput_per_million 1000\n\t\toutput_per_million 2000\n\t}\n", 1)
}

// A client that accepts compressed answers (curl --compressed, httpx,
// fetch) and a cloud that compresses whenever it may: the gateway still
// reads every answer, so tokens and cost are counted, and a cloud's
// context-length error still sends the request on.
func TestCompressingUpstreamIsMetered(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{Compress: true, MaxModelLen: 200})
	e.load(withCloudCost(defaultGateway))
	gw := e.gatewayName()
	tokens := func(kind string) float64 {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "alias": "cloud-first", "group": "cloud", "kind": kind})
	}
	cost := func() float64 {
		return metricValue(t, "caddy_hybrid_llm_cloud_cost_usd_total", map[string]string{"gateway": gw, "group": "cloud"})
	}
	cloudFirst := func(body string) string { return strings.Replace(body, `"chat-main"`, `"cloud-first"`, 1) }

	for _, tc := range []struct {
		name, body string
		completion float64
	}{
		{"json", cloudFirst(chatBody), 4},
		{"stream", cloudFirst(streamBody), 5},
	} {
		prompt0, completion0, cost0 := tokens("prompt"), tokens("completion"), cost()
		resp, body := post(t, "/v1/chat/completions", tc.body, "Accept-Encoding", "gzip, br")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "cloud" {
			t.Fatalf("%s: %d %s %s", tc.name, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
		if ce := resp.Header.Get("Content-Encoding"); ce != "" || !strings.Contains(string(body), `"cloud-first"`) {
			t.Errorf("%s: the client got %q, Content-Encoding %q", tc.name, body, ce)
		}
		if tokens("prompt") <= prompt0 || tokens("completion")-completion0 != tc.completion {
			t.Errorf("%s: tokens counted: prompt %v, completion %v (want %v)", tc.name,
				tokens("prompt")-prompt0, tokens("completion")-completion0, tc.completion)
		}
		if cost() <= cost0 {
			t.Errorf("%s: no cloud cost counted", tc.name)
		}
		// the cloud did compress: the gateway's transport asked for gzip
		reqs := e.cloudPosts()
		if len(reqs) == 0 {
			t.Fatalf("%s: the cloud got no request", tc.name)
		}
		if ae := reqs[len(reqs)-1].Header.Get("Accept-Encoding"); ae != "gzip" {
			t.Errorf("%s: the cloud was sent Accept-Encoding %q", tc.name, ae)
		}
	}

	// a request too long for the cloud's window: its (compressed)
	// context-length 400 still moves the request to the next target
	long := cloudFirst(strings.Replace(chatBody, "Say hello", strings.Repeat("hello ", 400), 1))
	resp, body := post(t, "/v1/chat/completions", long, "Accept-Encoding", "gzip, br")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" ||
		resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:context_length" {
		t.Errorf("context-length fallback: %d %s %q %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
			resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
}

// Caddy's encode compresses answers toward the client without holding a
// stream back: each event reaches the client while the upstream is still
// writing the next.
func TestEncodeKeepsStreamsFlowing(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	release := make(chan struct{})
	upstream, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	defer close(release)
	block := withPlainSelf(defaultGateway, upstream.URL())
	loadRaw(t, plainGlobals+`http://127.0.0.1:9080 {
	encode
	handle /v1/* {
		hybrid_llm {
			name `+e.gatewayName()+`
`+strings.NewReplacer("{CLOUD}", e.cloudSrv.URL()).Replace(block)+`
		}
	}
}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("not compressed: %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(zr).ReadString('\n')
	if err != nil || !strings.Contains(line, "first") {
		t.Fatalf("the first event did not arrive while the stream was open: %q %v", line, err)
	}
}

// A client that compresses its request body (Content-Encoding: gzip) is
// answered as if it had not: the gateway reads the decoded body, routes on
// its alias and sends the upstream the plain body, without the header.
// An encoding the gateway does not decode is a 415 that names it, never
// a misleading "not JSON".
func TestCompressedRequestBody(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	var gz strings.Builder
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, chatBody)
	_ = zw.Close()

	resp, body := post(t, "/v1/chat/completions", gz.String(), "Content-Encoding", "gzip")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" || !strings.Contains(string(body), `"model":"chat-main"`) {
		t.Fatalf("gzip body: %d %s", resp.StatusCode, body)
	}
	reqs := e.selfPosts()
	got := reqs[len(reqs)-1]
	if ce := got.Header.Get("Content-Encoding"); ce != "" || !strings.Contains(string(got.Body), `"model":"`+selfModel+`"`) {
		t.Errorf("the upstream got Content-Encoding %q and %q", ce, got.Body)
	}

	resp, body = post(t, "/v1/chat/completions", "\x0b\x02\x80", "Content-Encoding", "br")
	if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(body), `"code":"unsupported_content_encoding"`) || !strings.Contains(string(body), `\"br\"`) {
		t.Errorf("br body: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, "/v1/chat/completions", chatBody, "Content-Encoding", "gzip")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not valid gzip") {
		t.Errorf("plain body labelled gzip: %d %s", resp.StatusCode, body)
	}
}
