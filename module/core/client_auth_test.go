// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// BenchmarkAuthenticate is the per-request cost of client keys: finding
// the key, hashing it and looking it up; then with the client's limits
// (rpm and tpm) and attribution (its metric series) too.
func BenchmarkAuthenticate(b *testing.B) {
	cfg := &clients.Config{Clients: map[string]*clients.Client{}}
	var key string
	for i := range 1000 {
		key = "sk-client-" + strings.Repeat("x", 40) + strconv.Itoa(i)
		h := sha256.Sum256([]byte(key))
		cfg.Clients["c"+strconv.Itoa(i)] = &clients.Client{Key: "sha256:" + hex.EncodeToString(h[:])}
	}
	g := newFront(Front{Name: "default", Clock: clock.System, Logger: zap.NewNop()})
	g.Callers = clients.NewCallers(cfg, clients.Setting{Gateway: g.Name, Alias: func(string) bool { return true }, Logger: g.Logger})
	if err := g.Callers.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	cs := g.Callers.InForce()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if cl, ok := g.Callers.Authenticate(nil, r); !ok || cl == nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("key+limits+attribution", func(b *testing.B) {
		for _, name := range cs.Names() {
			c := cs.Named(name)
			c.RPM, c.TPM, c.Usage = 1<<30, 1<<30, new(clients.Usage)
		}
		t := &routing.Target{Group: "self", Model: "qwen", Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "self"}}}
		t.Seen.Metrics = routing.NewTargetMetrics("bench", "chat-main", t, "")
		body := []byte(`{"model":"chat-main","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}`)
		top, _ := protocol.Scan(body)
		r.URL.Path = "/v1/chat/completions"
		rt := new(Route)
		b.ReportAllocs()
		for b.Loop() {
			cl, ok := g.Callers.Authenticate(nil, r)
			if !ok {
				b.Fatal("refused")
			}
			tn := time.Now()
			*rt = *testRoute(g, cl, r, protocol.ChatCompletions)
			rt.q.Top = top
			rt.q.Features = routing.NewFeatures(body, r.Header, &rt.q.Top)
			if wait, _ := reserve(rt, tn); wait > 0 {
				b.Fatal("limited")
			}
			t.MetricsOf("bench", "chat-main", rt.x.clientName()).OK.Inc()
			rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 8, 16
			settle(rt, tn)
		}
	})
	b.Run("key+limits+budget", func(b *testing.B) {
		g.Money.Spend = books.NewSpendBook("", nil)
		for _, name := range cs.Names() {
			cs.Named(name).BudgetDay = 1e9
		}
		cloud := &routing.Target{Group: "cloud", Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "cloud"}, Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{},
			Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
		body := []byte(`{"model":"chat-main","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}`)
		top, _ := protocol.Scan(body)
		rt := new(Route)
		b.ReportAllocs()
		for b.Loop() {
			cl, _ := g.Callers.Authenticate(nil, r)
			tn := time.Now()
			*rt = *testRoute(g, cl, r, protocol.ChatCompletions)
			rt.q.Top = top
			rt.q.Features = routing.NewFeatures(body, r.Header, &rt.q.Top)
			if wait, _ := reserve(rt, tn); wait > 0 {
				b.Fatal("limited")
			}
			if why := admitTo(rt, cloud); why != "" {
				b.Fatal(why)
			}
			g.Money.Spend.Add(cl.Name, 1e-6, tn)
			rt.passage.Hold.Release(rt.f.Money)
			rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 8, 16
			settle(rt, tn)
		}
	})
}
