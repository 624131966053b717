// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// fakeGate records what the passage asks of it, and refuses with why.
type fakeGate struct {
	name string
	why  Reason
	log  *[]string
}

func (f fakeGate) Judge(*Passage, *Target) Reason {
	*f.log = append(*f.log, "judge "+f.name)
	return f.why
}

func (f fakeGate) Admit(*Passage, *Target) Reason {
	*f.log = append(*f.log, "admit "+f.name)
	return f.why
}

func (f fakeGate) Release(*Passage, *Target) { *f.log = append(*f.log, "release "+f.name) }

// A target's gates are asked in order; the first refusal is the reason,
// the gates after it are not asked, and what the ones before it took is
// given back, last first. Judged ahead of its turn, nothing is taken or
// given back.
func TestGatesFirstRefusalWins(t *testing.T) {
	var log []string
	tgt := &Target{Run: TargetRun{Gates: []Gate{
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
	if why := p.Judge(tgt); why != because.BreakerOpen {
		t.Fatalf("judge: %q", why)
	}
	if want := []string{"judge a", "judge b", "judge c"}; !slices.Equal(log, want) {
		t.Fatalf("judge asked %q, want %q", log, want)
	}
	log = nil
	open := &Target{Run: TargetRun{Gates: tgt.Run.Gates[:2]}}
	if why := p.Admit(open); why != "" || !slices.Equal(log, []string{"admit a", "admit b"}) {
		t.Fatalf("every gate open: %q, asked %q", why, log)
	}
}

// A target gets the gates its config calls for and no others: a feature
// that is not configured is not asked about.
func TestGatesOfWhatIsConfigured(t *testing.T) {
	clk := fakeClock(t)
	spent := TargetKit{clock: clk, spend: &SpendLimits{book: books.NewSpendBook("", nil), clock: clk}}
	bare := TargetKit{clock: clk}
	vllm := &upstream.Group{Kind: upstream.KindVLLM, VLLM: &upstream.VLLMGroup{}}
	cost := &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 1}
	for _, tc := range []struct {
		name string
		k    TargetKit
		t    *Target
		want string
	}{
		{"a cloud, nothing else", bare, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}, "api out"},
		{"a cloud with a window", bare, &Target{ContextWindow: 8192, Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}, "api out window"},
		{"a cloud with clients, unpriced", spent, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}, "api out closed"},
		{"a priced cloud with clients", spent, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Cost: cost}}, "api out closed hold"},
		{"a priced cloud with a breaker", spent, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Cost: cost, Breaker: &breaker.Config{}}}, "api out closed breaker hold"},
		{"a priced cloud without clients", bare, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Cost: cost}}, "api out"},
		{"a cloud that serves every API", bare, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI,
			APISettings: upstream.APISettings{APIs: upstream.VLLMAPIs}}}, "out"},
		{"vllm", spent, &Target{Upstream: vllm}, "out window"},
		{"vllm of chat completions only", spent, &Target{Upstream: &upstream.Group{Kind: upstream.KindVLLM, VLLM: &upstream.VLLMGroup{},
			APISettings: upstream.APISettings{APIs: []string{"chat/completions"}}}}, "api out window"},
		{"vllm with overflow and a breaker", spent, &Target{Upstream: &upstream.Group{Kind: upstream.KindVLLM, VLLM: &upstream.VLLMGroup{},
			Overflow: &upstream.OverflowConfig{}, Breaker: &breaker.Config{}}}, "out window overflow breaker"},
	} {
		var names []string
		for _, gt := range tc.k.GatesOf(tc.t) {
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
	k := TargetKit{clock: fakeClock(t)}
	c := &DegradeChain{Cap: 1}
	cloud := &upstream.Group{Kind: upstream.KindOpenAI}
	for _, tc := range []struct {
		name string
		t    *Target
		want string
	}{
		{"a tier", &Target{Tier: &TierConfig{}, Upstream: cloud}, "tier api out"},
		{"an upper target with a trigger", &Target{Trigger: &DegradeTrigger{}, Upstream: cloud}, "trigger api out"},
		{"an upper target without one", &Target{Upstream: cloud}, "api out"},
	} {
		var names []string
		for _, gt := range k.ChainGates(c, "chat", tc.t, k.GatesOf(tc.t)) {
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
	case apiGate:
		return "api"
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
	case OccupancyObserver:
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
