// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/hybridllm/caddy-hybrid-llm/simulator"
)

// BenchmarkProxyOverhead sends the same chat request through Caddy twice
// over, in process: to a plain reverse_proxy server and to a hybrid_llm
// server (a vLLM group with its probes and policy, an alias), both in
// front of the zero-latency vLLM simulator on loopback. The client, the
// servers and the simulator share the process, so time and allocations
// per request include all of them; the difference between the two is
// what the gateway adds.
func BenchmarkProxyOverhead(b *testing.B) {
	sim := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{"qwen"}, DisableRecording: true})
	upstream := httptest.NewServer(sim)
	defer upstream.Close()
	addr := strings.TrimPrefix(upstream.URL, "http://")

	plainAddr, hybridAddr := freeAddr(b), freeAddr(b)
	route := func(handler string) string {
		return `{"listen":["` + map[string]string{"proxy": plainAddr, "gw": hybridAddr}[handler] + `"],` +
			`"automatic_https":{"disable":true},"routes":[{"match":[{"path":["/v1/*"]}],"handle":[` +
			map[string]string{
				"proxy": `{"handler":"reverse_proxy","upstreams":[{"dial":"` + addr + `"}]}`,
				"gw": `{"handler":"hybrid_llm","groups":{"self":{"kind":"vllm","proxy":{"upstreams":[{"dial":"` + addr + `"}]}}},` +
					`"aliases":{"chat-main":{"targets":[{"group":"self","model":"qwen"}]}}}`,
			}[handler] + `]}]}`
	}
	cfg := `{"admin":{"disabled":true},"logging":{"logs":{"default":{"writer":{"output":"discard"}}}},` +
		`"apps":{"http":{"servers":{"plain":` + route("proxy") + `,"hybrid":` + route("gw") + `}}}}`
	if err := caddy.Load([]byte(cfg), true); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	post := func(addr, model string) int {
		body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":16}`)
		resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// the gateway takes requests once its probes saw the endpoint
	waitUntil(b, "the gateway's first answer", func() bool { return post(hybridAddr, "chat-main") == http.StatusOK })

	for _, tc := range []struct{ name, addr, model string }{
		{"reverse_proxy", plainAddr, "qwen"},
		{"hybrid_llm", hybridAddr, "chat-main"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if code := post(tc.addr, tc.model); code != http.StatusOK {
					b.Fatalf("status %d", code)
				}
			}
		})
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
