// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// A target gets the attempt observers its config calls for: the ledger's
// occupancy only for a group that occupies GPUs, health only where its
// attempts are scored, the breakers only with a breaker; faults and the
// span (which does nothing for a request not traced) always, the span
// innermost.
func TestObserversOfWhatIsConfigured(t *testing.T) {
	k := TargetKit{clock: fakeClock(t), ledger: books.Open(books.Config{})}
	for _, tc := range []struct {
		name string
		k    TargetKit
		t    *Target
		want string
	}{
		{"a cloud", k, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}, "faults span"},
		{"a cloud that occupies GPUs", k, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Run: upstream.GroupRun{Occupancy: 0.1}}}, "occupancy faults span"},
		{"occupancy without a ledger", TargetKit{}, &Target{Upstream: &upstream.Group{Kind: upstream.KindOpenAI, Run: upstream.GroupRun{Occupancy: 0.1}}}, "faults span"},
		{"a watched member", k, &Target{Seen: targetSeen{Health: &HealthMember{}}, Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}, "health faults span"},
		{"a latency strategy", k, &Target{Seen: targetSeen{latency: &memberLatency{}}, Upstream: &upstream.Group{Kind: upstream.KindOpenAI}}, "health faults span"},
		{"vllm unscored", k, &Target{Upstream: &upstream.Group{Kind: upstream.KindVLLM, VLLM: &upstream.VLLMGroup{}}}, "faults span"},
		{"vllm scored, with a breaker", k, &Target{Upstream: &upstream.Group{Kind: upstream.KindVLLM, VLLM: &upstream.VLLMGroup{Scored: true},
			Breaker: &breaker.Config{}, Run: upstream.GroupRun{Occupancy: 0.5}}}, "occupancy health faults breaker span"},
	} {
		var names []string
		for _, o := range tc.k.ObserversOf(tc.t) {
			names = append(names, partName(o))
		}
		if got := fmt.Sprint(names); got != "["+tc.want+"]" {
			t.Errorf("%s: observers %s, want [%s]", tc.name, got, tc.want)
		}
	}
}
