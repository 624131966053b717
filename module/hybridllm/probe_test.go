// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
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
	a, err := acquireProber(base, ownerA, settings(time.Hour, "qwen"), clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	b, err := acquireProber(base, ownerB, settings(time.Minute, "other"), clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two probers for one address")
	}
	a.begin()
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
	if n := probers.Holds(base); n != 1 {
		t.Fatalf("after one release: %d references", n)
	}
	if eff := a.settings.Load(); eff.healthInterval != time.Minute || len(eff.expect) != 1 {
		t.Errorf("settings after release: %+v", eff)
	}
	releaseProber(b, ownerB)
	if probers.Holds(base) != 0 {
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
	p, err := acquireProber(srv.URL(), oldCfg, settings(time.Hour), clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	p.begin()
	waitUntil(t, "the first probes", func() bool {
		s := p.snap.Load()
		return s.health == healthUp && !s.metricsAt.IsZero()
	})
	// the reload: the new config joins, the old one leaves
	if _, err := acquireProber(srv.URL(), newCfg, settings(20*time.Millisecond), clock.System, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseProber(p, newCfg) })
	releaseProber(p, oldCfg)

	v.SetHealthy(false)
	waitUntil(t, "the endpoint seen down at the new interval", func() bool { return p.snap.Load().health == healthDown })
	scraped := p.snap.Load().metricsAt
	waitUntil(t, "a metrics scrape at the new interval", func() bool { return p.snap.Load().metricsAt.After(scraped) })
}

// One failed health probe does not take an up endpoint down, nor one
// passed probe bring a down one back: `fall` and `rise` in a row do.
func TestHealthRiseAndFall(t *testing.T) {
	v, srv := startSim(t, simulator.VLLMConfig{})
	p := newProber(srv.URL(), clock.System, zap.NewNop())
	p.settings.Store(&probeSettings{timeout: 2 * time.Second, rise: 2, fall: 3})
	health := func() int32 {
		p.probeHealth(context.Background())
		return p.snap.Load().health
	}
	if h := health(); h != healthUp {
		t.Fatalf("the first probe decides: %d", h)
	}
	v.SetHealthy(false)
	if health() != healthUp || health() != healthUp {
		t.Fatal("down before fall 3")
	}
	if health() != healthDown {
		t.Fatal("not down after three failed probes")
	}
	v.SetHealthy(true)
	if health() != healthDown {
		t.Fatal("up after one passed probe, with rise 2")
	}
	v.SetHealthy(false)
	health() // a failure restarts the count
	v.SetHealthy(true)
	if health() != healthDown || health() != healthUp {
		t.Fatal("not up after two passed probes in a row")
	}
}

// Probes go out through the group's own transport: an https vLLM behind a
// certificate no public CA signed probes up when the group's transport
// skips verification, and down over a default transport.
func TestProbesUseTheGroupTransport(t *testing.T) {
	v := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{"qwen"}})
	srv := httptest.NewUnstartedServer(v)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	settings := probeSettings{healthInterval: time.Hour, metricsInterval: time.Hour, modelsInterval: time.Hour,
		timeout: 2 * time.Second, ttftWindow: time.Minute}

	plain := newProber(srv.URL, clock.System, zap.NewNop())
	plain.register(new(int), settings)
	plain.begin()
	defer plain.Destruct()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	ht := &reverseproxy.HTTPTransport{TLS: &reverseproxy.TLSConfig{InsecureSkipVerify: true}}
	if err := ht.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	settings.transport = ht
	group := newProber(srv.URL, clock.System, zap.NewNop())
	group.register(new(int), settings)
	group.begin()
	defer group.Destruct()

	waitUntil(t, "both probed", func() bool {
		return plain.snap.Load().health != healthUnknown && group.snap.Load().health != healthUnknown
	})
	if s := plain.snap.Load(); s.health != healthDown {
		t.Errorf("over a default transport the self-signed endpoint is %d", s.health)
	}
	if s := group.snap.Load(); s.health != healthUp {
		t.Errorf("over the group's transport: health %d (%s)", s.health, s.healthErr)
	}
	waitUntil(t, "the models probe", func() bool { return group.snap.Load().models != nil })
}
