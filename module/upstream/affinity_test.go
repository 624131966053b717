// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/vllmmetrics"
	"go.uber.org/zap"
)

// affineGroup is a vLLM group with affinity over endpoints of the given
// dials, each running the given number of requests (of 64 slots), their
// metrics fresh.
func affineGroup(t testing.TB, clk clock.Clock, dials []string, running map[string]float64) (*VLLMGroup, reverseproxy.UpstreamPool) {
	t.Helper()
	g := &VLLMGroup{Settings: Settings{maxNumSeqs: 64, StaleAfter: time.Hour, maxLoad: DefaultMaxLoad}, Endpoints: map[string]*Endpoint{},
		byUpstream: map[*reverseproxy.Upstream]*Endpoint{}, clock: clk}
	var pool reverseproxy.UpstreamPool
	for _, dial := range dials {
		p := probe.New("http://"+dial, clk, zap.NewNop())
		l := &vllmmetrics.ModelLoad{Running: running[dial]}
		p.Update(func(s *probe.Snapshot) {
			*s = probe.Snapshot{Health: probe.HealthUp, Models: map[string]int{"qwen": 32768},
				Loads: map[string]*vllmmetrics.ModelLoad{"qwen": l}, Single: l, MetricsAt: clk.Now()}
		})
		u := &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: dial}
		g.Endpoints[dial] = &Endpoint{Dial: dial, Prober: p, weight: 1, Breaker: new(breaker.Breaker)}
		g.byUpstream[u] = g.Endpoints[dial]
		pool = append(pool, u)
	}
	return g, pool
}

// route picks an endpoint for conversation key, giving its slot back.
func route(g *VLLMGroup, pool reverseproxy.UpstreamPool, key uint64) (string, bool) {
	slot := &Slot{Group: g, Model: "qwen", Affinity: key}
	u := g.selectEndpoint(pool, slot)
	slot.Release()
	if u == nil {
		return "", false
	}
	return u.Dial, slot.ByAffinity
}

var fourDials = []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000"}

// keys are conversations' keys.
func keys(n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = mix64(uint64(i)+1) | 1
	}
	return k
}

// A conversation's requests go to one endpoint, the same from any
// gateway that sees the same endpoints; conversations spread over all of
// them.
func TestAffinityKeepsAConversationWhereItWas(t *testing.T) {
	clk := fakeClock(t)
	one, pool1 := affineGroup(t, clk, fourDials, nil)
	other, pool2 := affineGroup(t, clk, fourDials, nil) // another gateway's view
	per := map[string]int{}
	for _, k := range keys(400) {
		a, affine := route(one, pool1, k)
		b, _ := route(one, pool1, k)
		c, _ := route(other, pool2, k)
		if !affine || a != b || a != c {
			t.Fatalf("key %x: %s, then %s, another gateway %s (by affinity %v)", k, a, b, c, affine)
		}
		per[a]++
	}
	for _, d := range fourDials {
		if per[d] < 60 || per[d] > 140 {
			t.Errorf("conversations per endpoint %v: uneven", per)
		}
	}
	// without a key: by load alone
	if _, affine := route(one, pool1, 0); affine {
		t.Error("a request without a key went by affinity")
	}
}

// An endpoint that leaves moves only the conversations it held; one that
// joins takes only conversations from the others, no shuffle among them.
func TestAffinityMovesOnlyTheEndpointsConversations(t *testing.T) {
	clk := fakeClock(t)
	all, poolAll := affineGroup(t, clk, fourDials, nil)
	three, poolThree := affineGroup(t, clk, fourDials[:3], nil)
	five, poolFive := affineGroup(t, clk, append(append([]string(nil), fourDials...), "10.0.0.5:8000"), nil)
	moved := 0
	for _, k := range keys(400) {
		was, _ := route(all, poolAll, k)
		now, _ := route(three, poolThree, k)
		if was != fourDials[3] && now != was {
			t.Fatalf("key %x moved from %s to %s when another endpoint left", k, was, now)
		}
		joined, _ := route(five, poolFive, k)
		if joined != was {
			moved++
			if joined != "10.0.0.5:8000" {
				t.Fatalf("key %x moved from %s to %s when a fifth joined", k, was, joined)
			}
		}
	}
	if moved < 40 || moved > 130 {
		t.Errorf("%d of 400 conversations moved to the fifth endpoint, want about 80", moved)
	}
}

// A conversation's endpoint loaded past max_load × the mean takes none of
// its requests: the next endpoint in the conversation's order does; once
// level again, it is back.
func TestAffinityBoundsTheLoad(t *testing.T) {
	clk := fakeClock(t)
	idle, pool := affineGroup(t, clk, fourDials, nil)
	k := keys(1)[0]
	home, _ := route(idle, pool, k)
	hot, hotPool := affineGroup(t, clk, fourDials, map[string]float64{home: 60}) // 60 of 64 slots, the others idle
	away, affine := route(hot, hotPool, k)
	if away == home || away == "" || !affine {
		t.Errorf("a hot endpoint still took its conversation: %s (home %s, by affinity %v)", away, home, affine)
	}
	// every endpoint busy alike: within the bound, home again
	level := map[string]float64{}
	for _, d := range fourDials {
		level[d] = 40
	}
	busy, busyPool := affineGroup(t, clk, fourDials, level)
	if back, _ := route(busy, busyPool, k); back != home {
		t.Errorf("with the fleet level, %s took the conversation of %s", back, home)
	}
}

func BenchmarkSelect16Affinity(b *testing.B) {
	dials := make([]string, 16)
	for i := range dials {
		dials[i] = fmt.Sprintf("10.0.0.%d:8000", i+1)
	}
	g, pool := affineGroup(b, clock.System, dials, nil)
	ks := keys(64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if d, _ := route(g, pool, ks[i%len(ks)]); d == "" {
			b.Fatal("nothing selected")
		}
		i++
	}
}
