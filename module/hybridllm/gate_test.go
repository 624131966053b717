// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// admitTo asks target t's gates for rt's request, as run does at t's
// turn (a target built by hand gets the gates its config calls for).
func admitTo(rt *route, t *Target) Reason {
	if t.Run.gates == nil {
		t.Run.gates = kitFor(rt.g).gatesOf(t)
	}
	rt.beginPassage()
	return rt.passage.Admit(t)
}

// judgeFor is admitTo for a target judged ahead of its turn.
func judgeFor(rt *route, t *Target) Reason {
	if t.Run.gates == nil {
		t.Run.gates = kitFor(rt.g).gatesOf(t)
	}
	rt.beginPassage()
	return rt.passage.judge(t)
}

// fakeGate records what the passage asks of it, and refuses with why.
type fakeGate struct {
	name string
	why  Reason
	log  *[]string
}

func (f fakeGate) judge(*Passage, *Target) Reason {
	*f.log = append(*f.log, "judge "+f.name)
	return f.why
}

func (f fakeGate) admit(*Passage, *Target) Reason {
	*f.log = append(*f.log, "admit "+f.name)
	return f.why
}

func (f fakeGate) release(*Passage, *Target) { *f.log = append(*f.log, "release "+f.name) }

// A target's gates are asked in order; the first refusal is the reason,
// the gates after it are not asked, and what the ones before it took is
// given back, last first. Judged ahead of its turn, nothing is taken or
// given back.
func TestGatesFirstRefusalWins(t *testing.T) {
	var log []string
	tgt := &Target{Run: targetRun{gates: []gate{
		fakeGate{"a", "", &log}, fakeGate{"b", "", &log},
		fakeGate{"c", because.BreakerOpen, &log}, fakeGate{"d", because.Overflow, &log},
	}}}
	var p Passage
	if why := p.Admit(tgt); why != because.BreakerOpen {
		t.Fatalf("admit: %q, want the first refusal", why)
	}
	if want := []string{"admit a", "admit b", "admit c", "release b", "release a"}; !slices.Equal(log, want) {
		t.Fatalf("admit asked %q, want %q", log, want)
	}
	log = nil
	if why := p.judge(tgt); why != because.BreakerOpen {
		t.Fatalf("judge: %q", why)
	}
	if want := []string{"judge a", "judge b", "judge c"}; !slices.Equal(log, want) {
		t.Fatalf("judge asked %q, want %q", log, want)
	}
	log = nil
	open := &Target{Run: targetRun{gates: tgt.Run.gates[:2]}}
	if why := p.Admit(open); why != "" || !slices.Equal(log, []string{"admit a", "admit b"}) {
		t.Fatalf("every gate open: %q, asked %q", why, log)
	}
}

// A target gets the gates its config calls for and no others: a feature
// that is not configured is not asked about.
func TestGatesOfWhatIsConfigured(t *testing.T) {
	clk := fakeClock(t)
	spent := &Gateway{clock: clk, money: money.Money{Spend: books.NewSpendBook("", nil)}}
	bare := &Gateway{clock: clk}
	vllm := &Group{Kind: KindVLLM, VLLM: &upstream.VLLMGroup{}}
	cost := &CostConfig{InputPerMillion: 1, OutputPerMillion: 1}
	for _, tc := range []struct {
		name string
		g    *Gateway
		t    *Target
		want string
	}{
		{"a cloud, nothing else", bare, &Target{Upstream: &Group{Kind: KindOpenAI}}, "out"},
		{"a cloud with a window", bare, &Target{ContextWindow: 8192, Upstream: &Group{Kind: KindOpenAI}}, "out window"},
		{"a cloud with clients, unpriced", spent, &Target{Upstream: &Group{Kind: KindOpenAI}}, "out closed"},
		{"a priced cloud with clients", spent, &Target{Upstream: &Group{Kind: KindOpenAI, Cost: cost}}, "out closed hold"},
		{"a priced cloud with a breaker", spent, &Target{Upstream: &Group{Kind: KindOpenAI, Cost: cost, Breaker: &breaker.Config{}}}, "out closed breaker hold"},
		{"a priced cloud without clients", bare, &Target{Upstream: &Group{Kind: KindOpenAI, Cost: cost}}, "out"},
		{"vllm", spent, &Target{Upstream: vllm}, "out window"},
		{"vllm with overflow and a breaker", spent, &Target{Upstream: &Group{Kind: KindVLLM, VLLM: &upstream.VLLMGroup{},
			Overflow: &OverflowConfig{}, Breaker: &breaker.Config{}}}, "out window overflow breaker"},
	} {
		var names []string
		for _, gt := range kitFor(tc.g).gatesOf(tc.t) {
			names = append(names, partName(gt))
		}
		if got := fmt.Sprint(names); got != "["+tc.want+"]" {
			t.Errorf("%s: gates %s, want [%s]", tc.name, got, tc.want)
		}
	}
}

// On an alias with a degradation chain, a tier's gates start with the
// tier's (its formats, the cap) and an upper target's with its
// trigger's; any other target's are its own.
func TestChainGatesComeFirst(t *testing.T) {
	k := TargetKit{Clock: fakeClock(t)}
	c := &chain{cap: 1}
	cloud := &Group{Kind: KindOpenAI}
	for _, tc := range []struct {
		name string
		t    *Target
		want string
	}{
		{"a tier", &Target{Tier: &TierConfig{}, Upstream: cloud}, "tier out"},
		{"an upper target with a trigger", &Target{trigger: &degradeTrigger{}, Upstream: cloud}, "trigger out"},
		{"an upper target without one", &Target{Upstream: cloud}, "out"},
	} {
		var names []string
		for _, gt := range k.chainGates(c, "chat", tc.t, k.gatesOf(tc.t)) {
			names = append(names, partName(gt))
		}
		if got := fmt.Sprint(names); got != "["+tc.want+"]" {
			t.Errorf("%s: gates %s, want [%s]", tc.name, got, tc.want)
		}
	}
}

// partName is a gate's or an observer's short name.
func partName(part any) string {
	switch part.(type) {
	case outGate:
		return "out"
	case cloudClosedGate:
		return "closed"
	case windowGate:
		return "window"
	case overflowGate:
		return "overflow"
	case breakerGate, breakerObserver:
		return "breaker"
	case cloudHoldGate:
		return "hold"
	case occupancyObserver:
		return "occupancy"
	case healthObserver:
		return "health"
	case faultObserver:
		return "faults"
	case spanObserver:
		return "span"
	case tierGate:
		return "tier"
	case triggerGate:
		return "trigger"
	}
	return fmt.Sprintf("%T", part)
}

// A breaker's half-open trial goes to the request the gates admit; when
// the cloud hold after it refuses the target, the trial is given back,
// so the next request can be the trial. Judging the target ahead of its
// turn takes no trial.
func TestBreakerTrialGivenBackWhenTheHoldRefuses(t *testing.T) {
	clk := fakeClock(t)
	g := &Gateway{clock: clk, money: money.Money{Spend: books.NewSpendBook("", nil)}}
	cfg := &breaker.Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Second)}
	cloud := &Target{Group: "cloud", Upstream: &Group{Run: upstream.GroupRun{Name: "cloud"}, Kind: KindOpenAI, Shared: &upstream.GroupState{},
		Breaker: cfg, Cost: &CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
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
	hold := cloud.Run.gates[len(cloud.Run.gates)-1]
	cloud.Run.gates[len(cloud.Run.gates)-1] = heldMeanwhile{hold, g}
	if why := admitTo(rt, cloud); why != because.BudgetHeld || rt.passage.Trial {
		t.Fatalf("a hold refused after the breaker: %q, trial kept %v", why, rt.passage.Trial)
	}
	g.money.Spend.Holds().Give("c", 1)
	cloud.Run.gates[len(cloud.Run.gates)-1] = hold
	rt = limitedRoute(g, cl, "/v1/chat/completions", body)
	if why := admitTo(rt, cloud); why != "" || !rt.passage.Trial || rt.passage.Hold.usd == 0 {
		t.Fatalf("the next request: %q, trial %v, held %g", why, rt.passage.Trial, rt.passage.Hold.usd)
	}
	if why := admitTo(limitedRoute(g, cl, "/v1/chat/completions", body), cloud); why != because.BreakerOpen {
		t.Fatalf("while the trial is out: %q", why)
	}
	rt.passage.Hold.Release(&rt.g.money)
}

// heldMeanwhile is a gate whose admit first lets others hold the whole
// of client c's budget.
type heldMeanwhile struct {
	gate
	g *Gateway
}

func (h heldMeanwhile) admit(p *Passage, t *Target) Reason {
	holdFor(h.g, "c", 1)
	return h.gate.admit(p, t)
}

// A hold topped up for a dearer target and then given back by release
// leaves the holds as they were before it.
func TestHoldReleaseGivesBackItsTopUp(t *testing.T) {
	g := &Gateway{clock: fakeClock(t), money: money.Money{Spend: books.NewSpendBook("", nil)}}
	cl := &clients.Caller{Name: "c", Known: true, BudgetDay: 1}
	cheap := &Target{Upstream: &Group{Kind: KindOpenAI, Shared: &upstream.GroupState{}, Cost: &CostConfig{InputPerMillion: 1, OutputPerMillion: 1}}}
	dear := &Target{Upstream: &Group{Kind: KindOpenAI, Shared: &upstream.GroupState{}, Cost: &CostConfig{InputPerMillion: 10, OutputPerMillion: 10}}}
	rt := limitedRoute(g, cl, "/v1/chat/completions", []byte(`{"model":"m","messages":[],"max_tokens":100}`))
	if why := admitTo(rt, cheap); why != "" {
		t.Fatal(why)
	}
	before, _ := g.money.Spend.Holds().Held()
	if why := admitTo(rt, dear); why != "" {
		t.Fatal(why)
	}
	if after, _ := g.money.Spend.Holds().Held(); after <= before {
		t.Fatalf("topped up: %g -> %g", before, after)
	}
	dear.Run.gates[len(dear.Run.gates)-1].release(&rt.passage, dear)
	near := func(v float64) bool { return v > before-1e-12 && v < before+1e-12 }
	if total, clients := g.money.Spend.Holds().Held(); !near(total) || !near(clients["c"]) || !near(rt.passage.Hold.usd) {
		t.Fatalf("released: total %g, the client's %g, the request's %g; want %g", total, clients["c"], rt.passage.Hold.usd, before)
	}
	rt.passage.Hold.Release(&rt.g.money)
	if total, clients := g.money.Spend.Holds().Held(); total > 1e-12 || len(clients) != 0 {
		t.Fatalf("the request ended: %+v", clients)
	}
}
