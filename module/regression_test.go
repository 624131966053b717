// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/simulator"
)

// In a plain reverse_proxy the policy meets upstreams it cannot probe (a
// unix socket, a placeholder address) and balances them on Caddy's
// request count; unloading the config afterwards (a reload, a stop) must
// not crash Caddy.
func TestStandalonePolicyCleanupAfterUnprobeableUpstream(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	s := new(LeastLoadSelection)
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	pool := reverseproxy.UpstreamPool{{Host: new(reverseproxy.Host), Dial: "unix//run/vllm.sock"}}
	if u := s.Select(pool, httptest.NewRequest("POST", "/v1/chat/completions", nil), nil); u != pool[0] {
		t.Fatalf("selected %v", u)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Cleanup panicked: %v", r)
		}
	}()
	if err := s.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

// A reload that asks a shared prober for a shorter interval gets it at
// once, not after the old (longer) interval has run out: "the shortest
// wins".
func TestShorterIntervalAppliesAtOnce(t *testing.T) {
	v, srv := startSim(t, simulator.VLLMConfig{})
	settings := func(d time.Duration) probeSettings {
		return probeSettings{healthInterval: d, metricsInterval: d, modelsInterval: time.Hour,
			timeout: time.Second, ttftWindow: time.Minute, expect: []string{"qwen"}}
	}
	oldCfg, newCfg := new(int), new(int)
	p, err := acquireProber(srv.URL(), oldCfg, settings(time.Hour), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first probes", func() bool {
		s := p.snap.Load()
		return s.health == healthUp && !s.metricsAt.IsZero()
	})
	// the reload: the new config joins, the old one leaves
	if _, err := acquireProber(srv.URL(), newCfg, settings(20*time.Millisecond), zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseProber(p, newCfg) })
	releaseProber(p, oldCfg)

	v.SetHealthy(false)
	waitUntil(t, "the endpoint seen down at the new interval", func() bool { return p.snap.Load().health == healthDown })
	scraped := p.snap.Load().metricsAt
	waitUntil(t, "a metrics scrape at the new interval", func() bool { return p.snap.Load().metricsAt.After(scraped) })
}

// The overflow check runs on every request to a group with overflow; in
// the steady state (no transition) it allocates nothing.
func TestOverflowEvaluateDoesNotAllocate(t *testing.T) {
	oc := &OverflowConfig{Waiting: &Threshold{Trigger: 8, Recover: 2}, InFlight: &Threshold{Trigger: 10, Recover: 2}}
	st, logger, t0 := new(overflowState), zap.NewNop(), time.Unix(1_800_000_000, 0)
	for _, waiting := range []float64{1, 10} { // off, then on
		oc.evaluate(st, signals{waiting: waiting}, t0, logger, "self")
		if n := testing.AllocsPerRun(100, func() { oc.evaluate(st, signals{waiting: waiting}, t0, logger, "self") }); n != 0 {
			t.Errorf("waiting=%v: %v allocations per request", waiting, n)
		}
	}
}

// An upstream of a vLLM group that cannot be probed (a unix socket, a
// placeholder) is "balanced on in-flight counts only", as the start-up
// warning says: it gets requests, here once the probed one is at its red
// line.
func TestUnprobedUpstreamOfAVLLMGroupGetsRequests(t *testing.T) {
	_, a := startSim(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, 1, 0, a)
	g.unknownOK = true
	unprobed := &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: "unix//run/vllm.sock"}
	pool = append(pool, unprobed)

	first, p, why := g.pick(pool, "qwen")
	if first == nil || p == nil {
		t.Fatalf("nothing selected: %s", why)
	}
	second, _, why := g.pick(pool, "qwen")
	if first != unprobed && second != unprobed {
		t.Errorf("the unprobed upstream got nothing: %v, then %v (%s)", first.Dial, second, why)
	}
	if n := g.endpoints[a.Addr()].p.inflight.Load(); n != 1 {
		t.Errorf("the probed endpoint holds %d slots, want 1", n)
	}
}
