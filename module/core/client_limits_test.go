// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// Fifty requests at once against a tpm of 500, each of which may use 118
// tokens: those admitted reserve their bound, so only as many as the
// minute holds (plus the one that crosses it) get in; their ends settle
// to what they used, and the wait that follows is what they used.
func TestTokenReservationBoundsConcurrency(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := newFront(Front{})
	cl := &clients.Caller{Name: "small", Known: true, TPM: 500, Usage: new(clients.Usage)}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + string(make40("a")) + `"}],"max_tokens":100}`)
	var admitted []*Route
	for range 50 {
		rt := testRoute(g, cl, httptestPost("/v1/chat/completions"), protocol.ForPath("/v1/chat/completions"))
		rt.q.Top, _ = protocol.Scan(body)
		rt.q.Features = routing.NewFeatures(body, nil, &rt.q.Top)
		if w, limit := reserve(rt, t0); w > 0 {
			if limit != "tokens" {
				t.Fatalf("refused for %s", limit)
			}
			continue
		}
		admitted = append(admitted, rt)
	}
	// the messages are 70 bytes of JSON: 18 tokens
	if p, k := bounds(admitted[0]).TokenBound(); p != 18 || k != 100 {
		t.Fatalf("bound %d+%d, want 18+100", p, k)
	}
	// 118 each: four fit under 500, the fifth crosses it
	if len(admitted) != 5 {
		t.Fatalf("%d of 50 admitted, want 5", len(admitted))
	}
	// each used 10 + 50: 300 in all, under the limit again
	for _, rt := range admitted {
		rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 10, 50
		settle(rt, t0)
	}
	if w := cl.Usage.Tokens.Wait(500, t0); w != 0 {
		t.Fatalf("300 of 500 used: wait %v", w)
	}
	rt := testRoute(g, cl, httptestPost("/v1/chat/completions"), protocol.ForPath("/v1/chat/completions"))
	rt.q.Top, _ = protocol.Scan(body)
	rt.q.Features = routing.NewFeatures(body, nil, &rt.q.Top)
	if w, _ := reserve(rt, t0); w != 0 {
		t.Fatalf("after the refunds: wait %v", w)
	}
	// one that used far more than it reserved: charged in full
	rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 10, 1190
	settle(rt, t0)
	// 300 + 1200 = 1500 of 500: a minute's worth over, two minutes' wait
	if w := cl.Usage.Tokens.Wait(500, t0); w != 2*time.Minute+120*time.Millisecond {
		t.Fatalf("1500 of 500: wait %v", w)
	}
}

// A request refused for its rpm gives back the tokens it reserved.
func TestRequestRefusalReturnsTheReservation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cl := &clients.Caller{Name: "c", Known: true, RPM: 1, TPM: 1000, Usage: new(clients.Usage)}
	body := []byte(`{"model":"m","prompt":"hi","max_tokens":300}`)
	for i, want := range []string{"", "requests"} {
		rt := testRoute(newFront(Front{}), cl, httptestPost("/v1/completions"), protocol.ForPath("/v1/completions"))
		rt.q.Top, _ = protocol.Scan(body)
		rt.q.Features = routing.NewFeatures(body, nil, &rt.q.Top)
		if _, limit := reserve(rt, t0); limit != want {
			t.Fatalf("request %d: limit %q, want %q", i, limit, want)
		}
	}
	// only the first request's 301 tokens are reserved: 699 left
	if w, _ := cl.Usage.Tokens.Reserve(1000, 699, t0); w != 0 {
		t.Fatalf("the refused request's reservation was kept: wait %v", w)
	}
}

func make40(s string) []byte {
	b := make([]byte, 0, 40)
	for len(b) < 40 {
		b = append(b, s...)
	}
	return b
}

func httptestPost(path string) *http.Request {
	return httptest.NewRequest(http.MethodPost, path, nil)
}

// Requests going to a priced cloud target at once hold what each may
// cost: once spend and holds reach the client's budget, the next ones
// are turned away for now (not for the day); a hold given back opens
// the cloud again, and the spend booked closes it for the day.
func TestCloudHoldsBoundTheBudget(t *testing.T) {
	clk := fakeClock(t)
	g := newFront(Front{Money: &money.Money{Spend: books.NewSpendBook("", nil)}, Clock: clk})
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 0.001}
	// 1 USD per million tokens: a request of 18 + 100 tokens holds 0.000118
	cloud := &routing.Target{Group: "cloud", Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "cloud"}, Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{},
		Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + string(make40("a")) + `"}],"max_tokens":100}`)
	newRoute := func() *Route {
		rt := testRoute(g, cl, httptestPost("/v1/chat/completions"), protocol.ForPath("/v1/chat/completions"))
		rt.q.Top, _ = protocol.Scan(body)
		rt.q.Features = routing.NewFeatures(body, nil, &rt.q.Top)
		return rt
	}
	var held []*Route
	for range 50 {
		rt := newRoute()
		switch why := admitTo(rt, cloud); why {
		case "":
			held = append(held, rt)
		case because.BudgetHeld:
		default:
			t.Fatalf("closed for %s", why)
		}
	}
	// 0.000118 each: eight fit under 0.001 before the ninth crosses it
	if len(held) != 9 {
		t.Fatalf("%d of 50 went to the cloud, want 9", len(held))
	}
	if why := admitTo(held[0], cloud); why != "" {
		t.Fatalf("a request's own hold closed the cloud to it: %s", why)
	}
	// the first one ends having spent nothing: room for one more
	held[0].passage.Hold.Release(held[0].f.Money)
	last := newRoute()
	if why := admitTo(last, cloud); why != "" {
		t.Fatalf("after a hold was given back: %s", why)
	}
	for _, rt := range append(held[1:], last) {
		g.Money.Spend.Add(cl.Name, 0.000118, clk.Now())
		rt.passage.Hold.Release(rt.f.Money)
	}
	if why, _ := g.Money.CloudClosed(cl, clk.Now()); why != because.Budget {
		t.Fatalf("the spent budget: closed for %q", why)
	}
}
