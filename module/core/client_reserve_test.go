// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/http"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// limitedRoute is a request of client cl for body on path, read as intake
// reads it.
func limitedRoute(g *Front, cl *clients.Caller, path string, body []byte) *Route {
	rt := testRoute(g, cl, httptestPost(path), protocol.ForPath(path))
	rt.q.Body = body
	rt.q.Top, _ = protocol.Scan(body)
	rt.q.Features = routing.NewFeatures(body, nil, &rt.q.Top)
	return rt
}

// testRoute is a request of client cl for r on api, before its body is
// read.
func testRoute(g *Front, cl *clients.Caller, r *http.Request, api *protocol.API) *Route {
	rt := &Route{f: g, r: r, q: routing.Asked{API: api}}
	rt.x = exchange{client: cl, r: r, q: &rt.q, start: time.Now()}
	return rt
}

// reserve admits rt into its client's limits at t, as intake does.
func reserve(rt *Route, t time.Time) (time.Duration, string) {
	return rt.held.Take(bounds(rt), t)
}

// settle ends rt at t, charging its client what it used.
func settle(rt *Route, t time.Time) {
	rt.held.Settle(rt.x.client, &rt.x.usage, t)
}

// bounds are the token bounds of rt, whose body is read.
func bounds(rt *Route) *routing.TokenBounds {
	rt.beginPassage()
	return &rt.passage.Bounds
}

// A request that ends without using what it reserved, after part of its
// reservation elapsed, must not hand the client more than its tpm: the
// requests admitted since keep their reservations.
func TestSettleDoesNotOverRefund(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := newFront(Front{})
	body := []byte(`{"model":"m","prompt":"hi","max_tokens":99}`)
	probe := limitedRoute(g, &clients.Caller{}, "/v1/completions", body)
	p, k := bounds(probe).TokenBound()
	tpm := int(p + k) // each request reserves a minute's worth
	cl := &clients.Caller{Name: "c", Known: true, TPM: tpm, Usage: new(clients.Usage)}
	a := limitedRoute(g, cl, "/v1/completions", body)
	if w, _ := reserve(a, t0); w != 0 {
		t.Fatalf("first: wait %v", w)
	}
	t1 := t0.Add(30 * time.Second)
	b := limitedRoute(g, cl, "/v1/completions", body)
	if w, _ := reserve(b, t1); w != 0 {
		t.Fatalf("second, half a minute on: wait %v", w)
	}
	// the first fails at t1, having used nothing: half its reservation
	// is behind it
	settle(a, t1)
	c := limitedRoute(g, cl, "/v1/completions", body)
	w, limit := reserve(c, t1)
	if w == 0 || limit != "tokens" {
		t.Fatalf("a third minute's worth within a minute was let in (wait %v, %q)", w, limit)
	}
	if interval := time.Minute / time.Duration(tpm); w != interval {
		t.Fatalf("wait %v, want %v", w, interval)
	}
	// what was used is still charged in full
	b.x.usage.Found, b.x.usage.Prompt, b.x.usage.Completion = true, p, k
	settle(b, t1)
	// paid off a minute on: the next token waits one interval
	if got, want := cl.Usage.Tokens.Wait(tpm, t1), time.Minute/time.Duration(tpm); got != want {
		t.Fatalf("after the second's settlement: wait %v, want %v (paid off 1m on)", got, want)
	}
}

// The completion a request may use is what it can be served: the client's
// ceiling where the ceilings apply it, a tier's max_tokens on that tier.
func TestTokenBoundCeilings(t *testing.T) {
	g := newFront(Front{})
	// a field the legacy completions endpoint does not read: the ceilings set
	// max_tokens to the ceiling, and that is what bounds the answer
	cl := &clients.Caller{Name: "c", Known: true, Ceilings: clients.Ceilings{MaxTokens: 100}}
	body, refusal := cl.Ceilings.Apply([]byte(`{"model":"m","prompt":"hi","max_completion_tokens":5000}`), protocol.ForPath("/v1/completions"))
	if refusal != nil {
		t.Fatal(refusal.Msg)
	}
	rt := limitedRoute(g, cl, "/v1/completions", body)
	if _, k := bounds(rt).TokenBound(); k != 100 {
		t.Fatalf("completion bound %d under a ceiling of 100", k)
	}
	// without max_tokens, the ceilings give it the ceiling
	body, _ = cl.Ceilings.Apply([]byte(`{"model":"m","messages":[]}`), protocol.ForPath("/v1/chat/completions"))
	if _, k := bounds(limitedRoute(g, cl, "/v1/chat/completions", body)).TokenBound(); k != 100 {
		t.Fatalf("completion bound %d without max_tokens under a ceiling of 100", k)
	}

	tier := &routing.Target{Group: "small", Tier: &routing.TierConfig{MaxTokens: 256}, Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "small"}}}
	for _, tc := range []struct {
		path, body string
		want       int64
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[]}`, 256},                   // sent with 256
		{"/v1/chat/completions", `{"model":"m","messages":[],"max_tokens":4000}`, 256}, // clamped
		{"/v1/chat/completions", `{"model":"m","messages":[],"max_tokens":50}`, 50},
		{"/v1/chat/completions", `{"model":"m","messages":[],"max_tokens":4000,"n":2}`, 512},
		{"/v1/responses", `{"model":"m","input":"hi"}`, 256},
		{"/v1/completions", `{"model":"m","prompt":"hi"}`, routing.DefaultReserveTokens}, // sent as it is
		{"/v1/completions", `{"model":"m","prompt":"hi","max_tokens":4000}`, 256},
	} {
		rt := limitedRoute(g, nil, tc.path, []byte(tc.body))
		if _, k := bounds(rt).TokenBoundOn(tier); k != tc.want {
			t.Errorf("%s %s on the tier: completion bound %d, want %d", tc.path, tc.body, k, tc.want)
		}
	}
	// elsewhere the tier's ceiling does not apply
	if _, k := bounds(limitedRoute(g, nil, "/v1/chat/completions", []byte(`{"model":"m","messages":[]}`))).TokenBound(); k != routing.DefaultReserveTokens {
		t.Fatalf("any target: completion bound %d", k)
	}
}

// A cloud tier's hold is what the tier can cost: the request is sent
// with its max_tokens.
func TestCloudHoldOnATier(t *testing.T) {
	g := newFront(Front{Money: &money.Money{Spend: books.NewSpendBook("", nil)}, Clock: fakeClock(t)})
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 1}
	tier := &routing.Target{Group: "cloud-small", Tier: &routing.TierConfig{MaxTokens: 100}, Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "cloud-small"},
		Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{}, Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
	rt := limitedRoute(g, cl, "/v1/chat/completions", []byte(`{"model":"m","messages":[]}`))
	if why := admitTo(rt, tier); why != "" {
		t.Fatal(why)
	}
	p, _ := bounds(rt).TokenBound()
	if want := float64(p+100) / 1e6; rt.passage.Hold.USD < want*0.999 || rt.passage.Hold.USD > want*1.001 {
		t.Fatalf("held %g USD, want %g (%d prompt + the tier's 100)", rt.passage.Hold.USD, want, p)
	}
	rt.passage.Hold.Release(rt.f.Money)
}

// Judging a cloud target takes no hold: skip only says whether the holds
// in flight close it; the hold is taken as the attempt starts, and
// released from the client it was held for.
func TestSkipTakesNoHold(t *testing.T) {
	g := newFront(Front{Money: &money.Money{Spend: books.NewSpendBook("", nil)}, Clock: fakeClock(t)})
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 0.001}
	cloud := &routing.Target{Group: "cloud", Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "cloud"}, Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{},
		Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
	body := []byte(`{"model":"m","messages":[],"max_tokens":100}`)
	rt := limitedRoute(g, cl, "/v1/chat/completions", body)
	for range 3 {
		if why := judgeFor(rt, cloud); why != "" {
			t.Fatalf("skipped: %s", why)
		}
	}
	if total, clients := g.Money.Spend.Holds().Held(); total != 0 || len(clients) != 0 || rt.passage.Hold.USD != 0 {
		t.Fatalf("skip took a hold: total %g, clients %v, the request's %g", total, clients, rt.passage.Hold.USD)
	}
	// a budget held up by others: skip says so, and still takes nothing
	holdFor(g, "c", 0.001)
	if why := judgeFor(rt, cloud); why != because.BudgetHeld {
		t.Fatalf("a held budget: skip says %q", why)
	}
	g.Money.Spend.Holds().Give("c", 0.001)
	if why := admitTo(rt, cloud); why != "" {
		t.Fatalf("hold: %q", why)
	}
	if total, clients := g.Money.Spend.Holds().Held(); total == 0 || clients["c"] != rt.passage.Hold.USD {
		t.Fatalf("holds %g %+v, the request's %g", total, clients, rt.passage.Hold.USD)
	}
	rt.passage.Hold.Release(rt.f.Money)
	if total, clients := g.Money.Spend.Holds().Held(); total != 0 || len(clients) != 0 {
		t.Fatalf("released: total %g, clients %v", total, clients)
	}

	// held for the spend cap only (the client has no budget here): the
	// release leaves the holds other requests of that name keep, under
	// a config that gives it a budget, as they are
	daily := &money.CloudSpend{DailyUSD: 10}
	capped := newFront(Front{Money: &money.Money{Spend: books.NewSpendBook("", nil), Cap: daily}, Clock: fakeClock(t)})
	holdFor(capped, "c", 0.5)
	free := &clients.Caller{Name: "c", Known: true}
	rt = limitedRoute(capped, free, "/v1/chat/completions", body)
	if why := admitTo(rt, cloud); why != "" {
		t.Fatal(why)
	}
	rt.passage.Hold.Release(rt.f.Money)
	if total, clients := capped.Money.Spend.Holds().Held(); clients["c"] != 0.5 || total < 0.5-1e-9 || total > 0.5+1e-9 {
		t.Fatalf("a cap-only hold released from the client's: total %g, clients %v", total, clients)
	}
}

// Whether to degrade is judged without effects: a tier judged for it
// takes no cloud hold, and its group's overflow controller is not driven
// (no transition, no dwell started), nor the overflow recorded on the
// request.
func TestDegradeNowHasNoEffects(t *testing.T) {
	g := newFront(Front{Money: &money.Money{Spend: books.NewSpendBook("", nil)}, Logger: zap.NewNop(), Clock: fakeClock(t)})
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 1}
	upper := &routing.Target{Group: "big", Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "big"}, Shared: &upstream.GroupState{}}}
	upper.Trigger = &routing.DegradeTrigger{Target: upper}
	upper.Trigger.Active.Store(true)

	// a self-hosted tier whose group is over its overflow trigger
	ep := &upstream.Endpoint{Prober: probe.New("http://127.0.0.1:1", clock.System, zap.NewNop()), Breaker: new(breaker.Breaker)}
	ep.Prober.Inflight.Store(5)
	busy := &routing.Target{Group: "small", Tier: &routing.TierConfig{}, Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "small"}, Shared: &upstream.GroupState{},
		Overflow: &upstream.OverflowConfig{InFlight: &upstream.Threshold{Trigger: 2, Recover: 1}},
		VLLM:     &upstream.VLLMGroup{Name: "small", Endpoints: map[string]*upstream.Endpoint{"a": ep}, Settings: upstream.Settings{StaleAfter: time.Second}}}}
	// a priced cloud tier
	cloud := &routing.Target{Group: "cloud-small", Tier: &routing.TierConfig{}, Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "cloud-small"}, Kind: upstream.KindOpenAI,
		Shared: &upstream.GroupState{}, Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}

	al := &routing.Alias{Name: "chat", Chain: &routing.DegradeChain{Cap: 1}}
	body := []byte(`{"model":"chat","messages":[],"max_tokens":100}`)
	rt := limitedRoute(g, cl, "/v1/chat/completions", body)
	rt.x.alias, rt.x.deg = al, new(routing.DegradeRecord)
	k := kitOf(g)
	busy.Run.Gates = k.ChainGates(al.Chain, "chat", busy, k.GatesOf(busy))
	cloud.Run.Gates = k.ChainGates(al.Chain, "chat", cloud, k.GatesOf(cloud))
	rt.beginPassage()
	rt.passage.Degradation = rt.x.deg

	if rt.passage.Rest = []*routing.Target{busy}; routing.LeavesForTier(&rt.passage, upper) {
		t.Fatal("degraded to a tier that overflows")
	}
	if active, since, _, changes := busy.Upstream.Shared.Overflow.View(); active || changes != 0 || !since.IsZero() || rt.passage.Overflow != "" {
		t.Fatalf("judging the tier drove its overflow: active %v, changes %d, request's overflow %q",
			active, changes, rt.passage.Overflow)
	}
	if rt.passage.Rest = []*routing.Target{busy, cloud}; !routing.LeavesForTier(&rt.passage, upper) {
		t.Fatal("the cloud tier could take it")
	}
	if total, clients := g.Money.Spend.Holds().Held(); total != 0 || len(clients) != 0 || rt.passage.Hold.USD != 0 {
		t.Fatalf("judging the cloud tier took a hold: total %g, clients %v", total, clients)
	}
}

// holdFor makes others hold usd for client in g's spend book.
func holdFor(g *Front, client string, usd float64) {
	h := g.Money.Spend.Holds()
	h.Lock()
	h.TakeLocked(client, usd)
	h.Unlock()
}
