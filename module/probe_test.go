// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/simulator"
)

// One prober per address, shared by its users; the shortest intervals
// and the union of expected names win; it stops with its last user.
func TestProberIsSharedAndStopsWithLastUser(t *testing.T) {
	_, srv := startSim(t, simulator.VLLMConfig{})
	base := srv.URL()
	ownerA, ownerB := new(int), new(int)
	settings := func(health time.Duration, expect ...string) probeSettings {
		return probeSettings{healthInterval: health, metricsInterval: time.Hour, modelsInterval: time.Hour,
			timeout: time.Second, ttftWindow: time.Minute, expect: expect}
	}
	a, err := acquireProber(base, ownerA, settings(time.Hour, "qwen"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	b, err := acquireProber(base, ownerB, settings(time.Minute, "other"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two probers for one address")
	}
	eff := a.settings.Load()
	if eff.healthInterval != time.Minute || len(eff.expect) != 2 {
		t.Errorf("merged settings: %+v", eff)
	}
	waitUntil(t, "the first probes", func() bool {
		s := a.snap.Load()
		return s.health == healthUp && s.models != nil && !s.metricsAt.IsZero()
	})
	if !a.snap.Load().anyMissing {
		t.Error("'other' is not served: anyMissing should be set")
	}

	releaseProber(a, ownerA)
	if n, ok := probers.References(base); !ok || n != 1 {
		t.Fatalf("after one release: %d references (%v)", n, ok)
	}
	if eff := a.settings.Load(); eff.healthInterval != time.Minute || len(eff.expect) != 1 {
		t.Errorf("settings after release: %+v", eff)
	}
	releaseProber(b, ownerB)
	if _, ok := probers.References(base); ok {
		t.Error("the prober outlived its last user")
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
