// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// admitTo asks target t's gates for rt's request, as run does at t's
// turn (a target built by hand gets the gates its config calls for).
func admitTo(rt *Route, t *routing.Target) routing.Reason {
	if t.Run.Gates == nil {
		t.Run.Gates = kitOf(rt.f).GatesOf(t)
	}
	rt.beginPassage()
	return rt.passage.Admit(t)
}

// judgeFor is admitTo for a target judged ahead of its turn.
func judgeFor(rt *Route, t *routing.Target) routing.Reason {
	if t.Run.Gates == nil {
		t.Run.Gates = kitOf(rt.f).GatesOf(t)
	}
	rt.beginPassage()
	return rt.passage.Judge(t)
}

// A breaker's half-open trial goes to the request the gates admit; when
// the cloud hold after it refuses the target, the trial is given back,
// so the next request can be the trial. Judging the target ahead of its
// turn takes no trial.
func TestBreakerTrialGivenBackWhenTheHoldRefuses(t *testing.T) {
	clk := fakeClock(t)
	g := newFront(Front{Clock: clk, Money: &money.Money{Spend: books.NewSpendBook("", nil)}})
	cfg := &breaker.Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Second)}
	cloud := &routing.Target{Group: "cloud", Upstream: &upstream.Group{Run: upstream.GroupRun{Name: "cloud"}, Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{},
		Breaker: cfg, Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
	br := &cloud.Upstream.Shared.Breaker
	br.Failure(cfg, clk.Now(), breaker.Cause{})
	body := []byte(`{"model":"m","messages":[],"max_tokens":100}`)
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 0.001}
	if why := admitTo(limitedRoute(g, cl, "/v1/chat/completions", body), cloud); why != because.BreakerOpen {
		t.Fatalf("an open breaker: %q", why)
	}
	clk.Advance(time.Second) // the cooldown is over: the next request is the trial
	rt := limitedRoute(g, cl, "/v1/chat/completions", body)
	if why := judgeFor(rt, cloud); why != "" || rt.passage.Trial {
		t.Fatalf("judged ahead: %q, trial taken %v", why, rt.passage.Trial)
	}

	// the hold refuses once the gates before it passed: others hold the
	// client's budget, though they did not when the closed gate looked
	hold := cloud.Run.Gates[len(cloud.Run.Gates)-1]
	cloud.Run.Gates[len(cloud.Run.Gates)-1] = heldMeanwhile{hold, g}
	if why := admitTo(rt, cloud); why != because.BudgetHeld || rt.passage.Trial {
		t.Fatalf("a hold refused after the breaker: %q, trial kept %v", why, rt.passage.Trial)
	}
	g.Money.Spend.Holds().Give("c", 1)
	cloud.Run.Gates[len(cloud.Run.Gates)-1] = hold
	rt = limitedRoute(g, cl, "/v1/chat/completions", body)
	if why := admitTo(rt, cloud); why != "" || !rt.passage.Trial || rt.passage.Hold.USD == 0 {
		t.Fatalf("the next request: %q, trial %v, held %g", why, rt.passage.Trial, rt.passage.Hold.USD)
	}
	if why := admitTo(limitedRoute(g, cl, "/v1/chat/completions", body), cloud); why != because.BreakerOpen {
		t.Fatalf("while the trial is out: %q", why)
	}
	rt.passage.Hold.Release(rt.f.Money)
}

// heldMeanwhile is a gate whose admit first lets others hold the whole
// of client c's budget.
type heldMeanwhile struct {
	routing.Gate
	g *Front
}

func (h heldMeanwhile) Admit(p *routing.Passage, t *routing.Target) routing.Reason {
	holdFor(h.g, "c", 1)
	return h.Gate.Admit(p, t)
}

// A hold topped up for a dearer target and then given back by release
// leaves the holds as they were before it.
func TestHoldReleaseGivesBackItsTopUp(t *testing.T) {
	g := newFront(Front{Clock: fakeClock(t), Money: &money.Money{Spend: books.NewSpendBook("", nil)}})
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 1}
	cheap := &routing.Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{}, Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
	dear := &routing.Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Shared: &upstream.GroupState{}, Cost: &upstream.CostConfig{InputPerMillion: 10, OutputPerMillion: 10}}}
	rt := limitedRoute(g, cl, "/v1/chat/completions", []byte(`{"model":"m","messages":[],"max_tokens":100}`))
	if why := admitTo(rt, cheap); why != "" {
		t.Fatal(why)
	}
	before, _ := g.Money.Spend.Holds().Held()
	if why := admitTo(rt, dear); why != "" {
		t.Fatal(why)
	}
	if after, _ := g.Money.Spend.Holds().Held(); after <= before {
		t.Fatalf("topped up: %g -> %g", before, after)
	}
	dear.Run.Gates[len(dear.Run.Gates)-1].Release(&rt.passage, dear)
	near := func(v float64) bool { return v > before-1e-12 && v < before+1e-12 }
	if total, clients := g.Money.Spend.Holds().Held(); !near(total) || !near(clients["c"]) || !near(rt.passage.Hold.USD) {
		t.Fatalf("released: total %g, the client's %g, the request's %g; want %g", total, clients["c"], rt.passage.Hold.USD, before)
	}
	rt.passage.Hold.Release(rt.f.Money)
	if total, clients := g.Money.Spend.Holds().Held(); total > 1e-12 || len(clients) != 0 {
		t.Fatalf("the request ended: %+v", clients)
	}
}
