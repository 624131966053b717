// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

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
	_, srv := simulator.StartVLLM(t, simulator.VLLMConfig{})
	base := srv.URL()
	ownerA, ownerB := new(int), new(int)
	settings := func(health time.Duration, expect ...string) Settings {
		return Settings{HealthInterval: health, MetricsInterval: time.Hour, ModelsInterval: time.Hour,
			Timeout: time.Second, TTFTWindow: time.Minute, Expect: expect}
	}
	a, err := Acquire(base, ownerA, settings(time.Hour, "qwen"), clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(base, ownerB, settings(time.Minute, "other"), clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two probers for one address")
	}
	a.Begin()
	eff := a.settings.Load()
	if eff.HealthInterval != time.Minute || len(eff.Expect) != 2 {
		t.Errorf("merged settings: %+v", eff)
	}
	waitUntil(t, "the first probes", func() bool {
		s := a.snap.Load()
		return s.Health == HealthUp && s.Models != nil && !s.MetricsAt.IsZero()
	})
	if !a.snap.Load().AnyMissing {
		t.Error("'other' is not served: anyMissing should be set")
	}

	Release(a, ownerA)
	if n := probers.Holds(base); n != 1 {
		t.Fatalf("after one release: %d references", n)
	}
	if eff := a.settings.Load(); eff.HealthInterval != time.Minute || len(eff.Expect) != 1 {
		t.Errorf("settings after release: %+v", eff)
	}
	Release(b, ownerB)
	if probers.Holds(base) != 0 {
		t.Error("the prober outlived its last user")
	}
}

// A reload that asks a shared prober for a shorter interval gets it at
// once, not after the old (longer) interval has run out: "the shortest
// wins".
func TestShorterIntervalAppliesAtOnce(t *testing.T) {
	v, srv := simulator.StartVLLM(t, simulator.VLLMConfig{})
	settings := func(d time.Duration) Settings {
		return Settings{HealthInterval: d, MetricsInterval: d, ModelsInterval: time.Hour,
			Timeout: time.Second, TTFTWindow: time.Minute, Expect: []string{"qwen"}}
	}
	oldCfg, newCfg := new(int), new(int)
	p, err := Acquire(srv.URL(), oldCfg, settings(time.Hour), clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	p.Begin()
	waitUntil(t, "the first probes", func() bool {
		s := p.snap.Load()
		return s.Health == HealthUp && !s.MetricsAt.IsZero()
	})
	// the reload: the new config joins, the old one leaves
	if _, err := Acquire(srv.URL(), newCfg, settings(20*time.Millisecond), clock.System, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Release(p, newCfg) })
	Release(p, oldCfg)

	v.SetHealthy(false)
	waitUntil(t, "the endpoint seen down at the new interval", func() bool { return p.snap.Load().Health == HealthDown })
	scraped := p.snap.Load().MetricsAt
	waitUntil(t, "a metrics scrape at the new interval", func() bool { return p.snap.Load().MetricsAt.After(scraped) })
}

// One failed health probe does not take an up endpoint down, nor one
// passed probe bring a down one back: `fall` and `rise` in a row do.
func TestHealthRiseAndFall(t *testing.T) {
	v, srv := simulator.StartVLLM(t, simulator.VLLMConfig{})
	p := New(srv.URL(), clock.System, zap.NewNop())
	p.settings.Store(&Settings{Timeout: 2 * time.Second, Rise: 2, Fall: 3})
	health := func() int32 {
		p.ProbeHealth(context.Background())
		return p.snap.Load().Health
	}
	if h := health(); h != HealthUp {
		t.Fatalf("the first probe decides: %d", h)
	}
	v.SetHealthy(false)
	if health() != HealthUp || health() != HealthUp {
		t.Fatal("down before fall 3")
	}
	if health() != HealthDown {
		t.Fatal("not down after three failed probes")
	}
	v.SetHealthy(true)
	if health() != HealthDown {
		t.Fatal("up after one passed probe, with rise 2")
	}
	v.SetHealthy(false)
	health() // a failure restarts the count
	v.SetHealthy(true)
	if health() != HealthDown || health() != HealthUp {
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
	settings := Settings{HealthInterval: time.Hour, MetricsInterval: time.Hour, ModelsInterval: time.Hour,
		Timeout: 2 * time.Second, TTFTWindow: time.Minute}

	plain := New(srv.URL, clock.System, zap.NewNop())
	plain.Register(new(int), settings)
	plain.Begin()
	defer plain.Destruct()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	ht := &reverseproxy.HTTPTransport{TLS: &reverseproxy.TLSConfig{InsecureSkipVerify: true}}
	if err := ht.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	settings.Transport = ht
	group := New(srv.URL, clock.System, zap.NewNop())
	group.Register(new(int), settings)
	group.Begin()
	defer group.Destruct()

	waitUntil(t, "both probed", func() bool {
		return plain.snap.Load().Health != HealthUnknown && group.snap.Load().Health != HealthUnknown
	})
	if s := plain.snap.Load(); s.Health != HealthDown {
		t.Errorf("over a default transport the self-signed endpoint is %d", s.Health)
	}
	if s := group.snap.Load(); s.Health != HealthUp {
		t.Errorf("over the group's transport: health %d (%s)", s.Health, s.HealthErr)
	}
	waitUntil(t, "the models probe", func() bool { return group.snap.Load().Models != nil })
}

// A model the endpoint answered it does not know is marked missing at
// once, and its /v1/models probe is woken to confirm or clear the mark.
func TestMarkMissing(t *testing.T) {
	p := New("http://127.0.0.1:1", clock.System, zap.NewNop())
	p.Register(t, Settings{Expect: []string{"a", "b"}})

	// before any /v1/models answer: the other names still count as served
	p.MarkMissing("a")
	snap := p.Snapshot()
	if _, ok := snap.Models["a"]; ok || !snap.AnyMissing {
		t.Errorf("a still served: %v", snap.Models)
	}
	if _, ok := snap.Models["b"]; !ok {
		t.Errorf("b no longer served: %v", snap.Models)
	}
	select {
	case <-p.loops.wake[2]:
	default:
		t.Error("the /v1/models probe was not woken")
	}

	// after one: the name goes, the rest (and max_model_len) stay
	p.Update(func(s *Snapshot) { s.Models, s.AnyMissing = map[string]int{"a": 4096, "b": 8192}, false })
	p.MarkMissing("b")
	snap = p.Snapshot()
	if len(snap.Models) != 1 || snap.Models["a"] != 4096 || !snap.AnyMissing || !p.missed["b"] {
		t.Errorf("after marking b: %v any missing %v", snap.Models, snap.AnyMissing)
	}
}
