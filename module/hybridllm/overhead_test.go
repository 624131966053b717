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

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// BenchmarkProxyOverhead sends the same chat request through Caddy, in
// process: to a plain reverse_proxy server and to a hybrid_llm server (a
// vLLM group with its probes and policy, an alias), both in front of the
// zero-latency vLLM simulator on loopback; then the same with the access
// log on, the plain server beside the quickstart's gateway
// (examples/Caddyfile: a breaker, overflow, costs, probes every 250 ms, a
// cloud group, a client key); and the Messages API, native and translated
// into chat completions. The client, the servers and the simulator share the
// process, so time and allocations per request include all of them; the
// difference within each pair is what the gateway adds.
func BenchmarkProxyOverhead(b *testing.B) {
	sim := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{"qwen"}, DisableRecording: true})
	upstream := httptest.NewServer(sim)
	defer upstream.Close()
	addr := strings.TrimPrefix(upstream.URL, "http://")

	cloud := httptest.NewServer(simulator.NewCloud(simulator.CloudConfig{Models: []string{"gpt-4o-mini"}, APIKey: "sk-bench"}))
	defer cloud.Close()
	plainAddr, hybridAddr, plainLogAddr, quickAddr, limitsAddr, chatOnlyAddr := freeAddr(b), freeAddr(b), freeAddr(b), freeAddr(b), freeAddr(b), freeAddr(b)
	server := func(listen, handler, logs string) string {
		return `{"listen":["` + listen + `"],` + logs +
			`"automatic_https":{"disable":true},"routes":[{"match":[{"path":["/v1/*"]}],"handle":[` + handler + `]}]}`
	}
	proxy := `{"handler":"reverse_proxy","upstreams":[{"dial":"` + addr + `"}]}`
	minimal := `{"handler":"hybrid_llm","groups":{"self":{"kind":"vllm","proxy":{"upstreams":[{"dial":"` + addr + `"}]}}},` +
		`"aliases":{"chat-main":{"targets":[{"group":"self","model":"qwen"}]}}}`
	// the same with a group that serves chat completions only: a Messages
	// request goes translated
	chatOnly := strings.Replace(minimal, `"kind":"vllm",`, `"kind":"vllm","apis":["chat/completions"],`, 1)
	// examples/Caddyfile, adapted, with the simulator's --max-num-seqs
	quick := `{"handler":"hybrid_llm","clients":{"clients":{"bench":{"key":"sha256:` + benchKeyHash + `"}}},"groups":{` +
		`"cloud":{"kind":"openai","api_key":"sk-bench","cost":{"input_per_million":0.15,"output_per_million":0.6},` +
		`"proxy":{"upstreams":[{"dial":"` + strings.TrimPrefix(cloud.URL, "http://") + `"}]}},` +
		`"self":{"kind":"vllm","max_num_seqs":100000,"max_queue":4,` +
		`"breaker":{"allowed_fails":5,"cooldown":60000000000,"load_time":45000000000,"window":30000000000},` +
		`"cost":{"gpu_cost_per_month":1000,"gpus":1},"overflow":{"dwell":2000000000,"waiting":{"recover":0,"trigger":3}},` +
		`"probe":{"metrics_interval":250000000},"proxy":{"upstreams":[{"dial":"` + addr + `"}]}}},` +
		`"aliases":{"chat-main":{"targets":[{"group":"self","model":"qwen"},{"group":"cloud","model":"gpt-4o-mini","timeout":120000000000}]}}}`
	// the same, its client with limits and a budget: each request
	// reserves tokens and settles them
	limits := strings.Replace(quick, `"bench":{"key":"sha256:`+benchKeyHash+`"}`,
		`"bench":{"key":"sha256:`+benchKeyHash+`","rpm":1000000000,"tpm":1000000000,"budget_day_usd":1000000}`, 1)
	const accessLog = `"logs":{},`
	// the access log is encoded as JSON, then discarded
	cfg := `{"admin":{"disabled":true},"logging":{"logs":{"default":{"writer":{"output":"discard"}}}},` +
		`"apps":{"http":{"servers":{"plain":` + server(plainAddr, proxy, "") + `,"hybrid":` + server(hybridAddr, minimal, "") +
		`,"plainlog":` + server(plainLogAddr, proxy, accessLog) + `,"quick":` + server(quickAddr, quick, accessLog) +
		`,"chatonly":` + server(chatOnlyAddr, strings.Replace(chatOnly, `"handler":"hybrid_llm"`, `"handler":"hybrid_llm","name":"chatonly"`, 1), "") +
		`,"limits":` + server(limitsAddr, strings.Replace(limits, `"handler":"hybrid_llm"`, `"handler":"hybrid_llm","name":"limits"`, 1), accessLog) + `}}}}`
	if err := caddy.Load([]byte(cfg), true); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	post := func(addr, model string) int {
		path := "/v1/chat/completions"
		if m, ok := strings.CutSuffix(model, " messages"); ok {
			path, model = "/v1/messages", m // the same request in the Messages API
		}
		body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":16}`)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		// the quickstart's client key; every server gets it, for the same bytes
		req.Header.Set("Authorization", "Bearer sk-bench-client")
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// the gateway takes requests once its probes saw the endpoint
	for _, a := range []string{hybridAddr, quickAddr, limitsAddr, chatOnlyAddr} {
		waitUntil(b, "the gateway's first answer", func() bool { return post(a, "chat-main") == http.StatusOK })
	}

	for _, tc := range []struct{ name, addr, model string }{
		{"reverse_proxy", plainAddr, "qwen"},
		{"hybrid_llm", hybridAddr, "chat-main"},
		{"hybrid_llm messages", hybridAddr, "chat-main messages"},
		{"hybrid_llm messages translated", chatOnlyAddr, "chat-main messages"},
		{"reverse_proxy+log", plainLogAddr, "qwen"},
		{"quickstart+log", quickAddr, "chat-main"},
		{"quickstart+log+limits", limitsAddr, "chat-main"},
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

// benchKeyHash is the SHA-256 of sk-bench-client, the key the benchmark's
// requests carry.
const benchKeyHash = "816adcba23292967efcb2e7dabc6a41077a064cfc02cadfe27c984e8812a8e04"

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
