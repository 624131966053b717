// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
)

// BenchmarkAuthenticate is the per-request cost of client keys: finding
// the key, hashing it and looking it up; then with the client's limits
// (rpm and tpm) and attribution (its metric series) too.
func BenchmarkAuthenticate(b *testing.B) {
	g := &Gateway{Clients: &Clients{}, clock: clock.System}
	g.in.callers = newCallers(g)
	cs := &clientSet{byKey: map[clients.KeyHash]*client{}, byName: map[string]*client{}}
	for i := range 1000 {
		key := "sk-client-" + strings.Repeat("x", 40) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		cs.byKey[sha256.Sum256([]byte(key))] = &client{name: key[:12]}
	}
	key := "sk-client-" + strings.Repeat("x", 40) + "abb"
	g.in.callers.set.Store(cs)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if cl, ok := g.in.callers.authenticate(nil, r, "id", ""); !ok || cl == nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("key+limits+attribution", func(b *testing.B) {
		for _, c := range cs.byKey {
			c.known, c.rpm, c.tpm, c.usage = true, 1<<30, 1<<30, new(clientUsage)
		}
		t := &Target{Group: "self", Model: "qwen", group: &Group{run: groupRun{name: "self"}}}
		t.seen.metrics = newTargetMetrics("bench", "chat-main", t, "")
		body := []byte(`{"model":"chat-main","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}`)
		top, _ := protocol.Scan(body)
		r.URL.Path = "/v1/chat/completions"
		rt := new(route)
		b.ReportAllocs()
		for b.Loop() {
			cl, ok := g.in.callers.authenticate(nil, r, "id", "")
			if !ok {
				b.Fatal("refused")
			}
			tn := time.Now()
			*rt = *testRoute(g, cl, r, protocol.ChatCompletions)
			rt.q.top = top
			rt.q.features = newFeatures(body, r.Header, &rt.q.top)
			if wait, _ := reserve(rt, tn); wait > 0 {
				b.Fatal("limited")
			}
			t.metricsOf("bench", "chat-main", rt.x.clientName()).ok.Inc()
			rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 8, 16
			settle(rt, tn)
		}
	})
	b.Run("key+limits+budget", func(b *testing.B) {
		g.money.spend = books.NewSpendBook("", nil)
		for _, c := range cs.byKey {
			c.budgetDay = 1e9
		}
		cloud := &Target{Group: "cloud", group: &Group{run: groupRun{name: "cloud"}, Kind: KindOpenAI, shared: &groupShared{},
			Cost: &CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
		body := []byte(`{"model":"chat-main","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}`)
		top, _ := protocol.Scan(body)
		rt := new(route)
		b.ReportAllocs()
		for b.Loop() {
			cl, _ := g.in.callers.authenticate(nil, r, "id", "")
			tn := time.Now()
			*rt = *testRoute(g, cl, r, protocol.ChatCompletions)
			rt.q.top = top
			rt.q.features = newFeatures(body, r.Header, &rt.q.top)
			if wait, _ := reserve(rt, tn); wait > 0 {
				b.Fatal("limited")
			}
			if why := admitTo(rt, cloud); why != "" {
				b.Fatal(why)
			}
			g.money.spend.Add(cl.name, 1e-6, tn)
			rt.passage.hold.release(&rt.g.money)
			rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 8, 16
			settle(rt, tn)
		}
	})
}
