// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/ratelimit"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
	"github.com/hybridllm/caddy-hybrid-llm/module/vllmmetrics"
)

func TestScoreOrder(t *testing.T) {
	load := func(w, r, kv float64) *vllmmetrics.ModelLoad {
		return &vllmmetrics.ModelLoad{Waiting: w, Running: r, KVUsage: kv}
	}
	view := func(l *vllmmetrics.ModelLoad) endpointView {
		return endpointView{health: probe.HealthUp, load: l, maxNumSeqs: 8, weight: 1}
	}
	score := func(v endpointView) float64 {
		s, why := v.score()
		if why != "" {
			t.Fatalf("skipped: %s", why)
		}
		return s
	}
	// waiting first: a full but unqueued replica beats a queueing one
	if a, b := score(view(load(0, 8, 0.9))), score(view(load(1, 1, 0.1))); a >= b {
		t.Errorf("no queue %v should beat a queue of one %v", a, b)
	}
	// then the running share
	if a, b := score(view(load(0, 2, 0.9))), score(view(load(0, 3, 0.0))); a >= b {
		t.Errorf("fewer running %v should win %v", a, b)
	}
	// then KV-cache usage
	if a, b := score(view(load(0, 2, 0.1))), score(view(load(0, 2, 0.5))); a >= b {
		t.Errorf("less KV %v should win %v", a, b)
	}
	// a weight of 2 halves the score
	v := view(load(0, 4, 0))
	w := v
	w.weight = 2
	if score(w) != score(v)/2 {
		t.Errorf("weight not applied: %v vs %v", score(w), score(v))
	}
	// requests sent since the scrape count: the gauges lag
	lagged := view(load(0, 2, 0))
	lagged.inflight, lagged.atScrape = 5, 1
	if s := score(lagged); math.Abs(s-6.0/8) > 1e-9 {
		t.Errorf("lag-corrected score %v, want 6/8", s)
	}
	// the gateway's own in-flight count is a floor
	floor := view(load(0, 0, 0))
	floor.inflight, floor.atScrape = 3, 3
	if s := score(floor); math.Abs(s-3.0/8) > 1e-9 {
		t.Errorf("floor score %v, want 3/8", s)
	}
	// past max_num_seqs the estimate queues
	over := view(load(0, 8, 0))
	over.inflight, over.atScrape = 2, 0
	if s := score(over); math.Abs(s-(2+1)) > 1e-9 {
		t.Errorf("queued estimate %v, want 3", s)
	}
}

func TestScoreSkips(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v         endpointView
		unknownOK bool
		want      reason
	}{
		{"down", endpointView{health: probe.HealthDown}, false, because.Unhealthy},
		{"unknown health is fine", endpointView{health: probe.HealthUnknown, pending: true}, false, ""},
		{"misconfigured", endpointView{health: probe.HealthUp, modelsKnown: true, serves: false, pending: true}, false, because.Misconfig},
		{"models unknown is fine", endpointView{health: probe.HealthUp, pending: true}, false, ""},
		{"red line", endpointView{health: probe.HealthUp, pending: true, inflight: 4, redLine: 4}, false, because.RedLine},
		{"below red line", endpointView{health: probe.HealthUp, pending: true, inflight: 3, redLine: 4}, false, ""},
		{"stale means saturated", endpointView{health: probe.HealthUp}, false, because.StaleMetrics},
		{"stale configured ok", endpointView{health: probe.HealthUp}, true, ""},
		{"young prober without data", endpointView{health: probe.HealthUp, pending: true}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			v.unknownOK = tc.unknownOK
			if _, why := v.score(); why != tc.want {
				t.Errorf("reason %q, want %q", why, tc.want)
			}
		})
	}
}

// driveProcessClock gives the gateways and policies a whole Caddy loads
// during the test a clock moved by hand (their background loops read it
// too), and gives them the system's again after.
func driveProcessClock(t *testing.T) *clock.Manual {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	clock.Process = clk
	t.Cleanup(func() { clock.Process = clock.System })
	return clk
}

// fakeClock is a test's clock, moved by hand.
func fakeClock(t *testing.T) *clock.Manual {
	t.Helper()
	return clock.NewManual(time.Unix(1_800_000_000, 0))
}

// testGroup builds a vLLM group over real simulators, with probers that
// are driven by hand (no probe loops).
func testGroup(t *testing.T, clk clock.Clock, maxNumSeqs, maxQueue int, servers ...*simulator.Server) (*VLLMGroup, reverseproxy.UpstreamPool) {
	t.Helper()
	g := &VLLMGroup{Name: "self", Settings: Settings{maxNumSeqs: maxNumSeqs, maxQueue: maxQueue, StaleAfter: 2 * time.Second}, Endpoints: map[string]*Endpoint{}, clock: clk}
	var pool reverseproxy.UpstreamPool
	for _, s := range servers {
		p := probe.New(s.URL(), clk, zap.NewNop())
		p.Register(t, probe.Settings{Timeout: 2 * time.Second, TTFTWindow: time.Minute, Expect: []string{"qwen"}})
		g.Endpoints[s.Addr()] = &Endpoint{Dial: s.Addr(), Prober: p, weight: 1, Breaker: new(breaker.Breaker)}
		pool = append(pool, &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: s.Addr()})
	}
	return g, pool
}

func probeAll(g *VLLMGroup) {
	for _, ep := range g.Endpoints {
		ep.Prober.ProbeHealth(context.Background())
		ep.Prober.ProbeModels(context.Background())
		ep.Prober.ProbeMetrics(context.Background())
	}
}

// A burst goes to the replica that vLLM's own metrics show idle, and the
// in-flight correction spreads it once they are level.
func TestBurstGoesToLeastLoadedReplica(t *testing.T) {
	busySim, busy := simulator.StartVLLM(t, simulator.VLLMConfig{ITL: time.Hour})
	_, idle := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, fakeClock(t), 8, 0, busy, idle)

	// four long requests on the busy replica, not through the gateway
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, busy.URL()+"/v1/chat/completions",
				strings.NewReader(`{"model":"qwen","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body) // until cancelled
				resp.Body.Close()
			}
		}()
	}
	waitUntil(t, "four running on the busy replica", func() bool { r, _ := busySim.Load(); return r == 4 })
	probeAll(g)

	got := map[string]int{}
	for range 4 {
		u, p, why := g.pick(pool, "qwen")
		if u == nil {
			t.Fatalf("nothing selected: %s", why)
		}
		got[u.Dial]++
		_ = p // reservations stay held: the burst is in flight
	}
	if got[idle.Addr()] != 4 {
		t.Errorf("burst of 4 landed %v, want all on the idle replica %s", got, idle.Addr())
	}
	// now level (4 and 4 of 8): the next ones alternate
	for range 4 {
		u, _, _ := g.pick(pool, "qwen")
		got[u.Dial]++
	}
	if got[busy.Addr()] != 2 || got[idle.Addr()] != 6 {
		t.Errorf("after levelling: %v, want 2 on busy and 6 on idle", got)
	}
}

// The red line holds without any metrics: at max_num_seqs + max_queue in
// flight nothing more is selected, and a released slot is reused.
func TestRedLine(t *testing.T) {
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, fakeClock(t), 2, 1, a, b)
	g.Settings.unknownOK = true // no metrics scraped at all: the fuse alone

	var held []*probe.Prober
	for range 6 {
		u, p, why := g.pick(pool, "qwen")
		if u == nil {
			t.Fatalf("selection %d failed early: %s", len(held), why)
		}
		held = append(held, p)
	}
	u, _, why := g.pick(pool, "qwen")
	if u != nil || why != because.RedLine {
		t.Fatalf("past the red line: selected %v, reason %q", u, why)
	}
	for _, ep := range g.Endpoints {
		if n := ep.Prober.Inflight.Load(); n != 3 {
			t.Errorf("%s holds %d, want 3", ep.Dial, n)
		}
	}
	held[0].Inflight.Add(-1)
	if u, _, _ := g.pick(pool, "qwen"); u == nil {
		t.Error("a released slot was not reused")
	}
}

// Many goroutines racing for the last slots never exceed the red line.
func TestRedLineUnderRace(t *testing.T) {
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, fakeClock(t), 5, 0, a)
	g.Settings.unknownOK = true
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if u, _, _ := g.pick(pool, "qwen"); u != nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 5 || g.Endpoints[a.Addr()].Prober.Inflight.Load() != 5 {
		t.Errorf("%d selections won, in flight %d; want 5", won, g.Endpoints[a.Addr()].Prober.Inflight.Load())
	}
}

func TestHealthProbeTakesReplicaOutAndBack(t *testing.T) {
	simA, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, fakeClock(t), 8, 0, a, b)
	probeAll(g)

	simA.SetHealthy(false)
	g.Endpoints[a.Addr()].Prober.ProbeHealth(context.Background()) // one probe interval
	for range 5 {
		u, p, _ := g.pick(pool, "qwen")
		if u == nil || u.Dial != b.Addr() {
			t.Fatalf("selected %v while %s is down", u, a.Addr())
		}
		p.Inflight.Add(-1)
	}
	_ = a.Refuse() // a booting vLLM refuses connections: down too
	g.Endpoints[a.Addr()].Prober.ProbeHealth(context.Background())
	if snap := g.Endpoints[a.Addr()].Prober.Snapshot(); snap.Health != probe.HealthDown || snap.HealthErr != "connection refused" {
		t.Errorf("refused: health %d %q", snap.Health, snap.HealthErr)
	}

	_ = a.Resume()
	simA.SetHealthy(true)
	g.Endpoints[a.Addr()].Prober.ProbeHealth(context.Background())
	g.Endpoints[b.Addr()].Prober.Inflight.Add(3) // b busier: a must be chosen again
	u, _, _ := g.pick(pool, "qwen")
	if u == nil || u.Dial != a.Addr() {
		t.Errorf("recovered replica not selected: %v", u)
	}
}

func TestWrongModelNameIsMisconfigured(t *testing.T) {
	_, wrong := simulator.StartVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"llama-3"}})
	_, right := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, fakeClock(t), 8, 0, wrong, right)
	probeAll(g)

	if snap := g.Endpoints[wrong.Addr()].Prober.Snapshot(); snap.Health != probe.HealthUp {
		t.Fatal("a misconfigured replica is still healthy: the state is its own")
	}
	for range 3 {
		u, p, _ := g.pick(pool, "qwen")
		if u == nil || u.Dial != right.Addr() {
			t.Fatalf("selected %v", u)
		}
		p.Inflight.Add(-1)
	}
	g2, pool2 := testGroup(t, fakeClock(t), 8, 0, wrong)
	probeAll(g2)
	if u, _, why := g2.pick(pool2, "qwen"); u != nil || why != because.Misconfig {
		t.Errorf("only a misconfigured replica: %v %q", u, why)
	}
	if ml := g.Endpoints[right.Addr()].Prober.Snapshot().Models["qwen"]; ml != 32768 {
		t.Errorf("max_model_len %d", ml)
	}
}

func TestStaleMetrics(t *testing.T) {
	clk := fakeClock(t)
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, clk, 8, 0, a)
	probeAll(g)
	if u, p, why := g.pick(pool, "qwen"); u == nil {
		t.Fatalf("fresh metrics: %s", why)
	} else {
		p.Inflight.Add(-1)
	}

	clk.Set(clk.Now().Add(g.Settings.StaleAfter + time.Millisecond))
	if u, _, why := g.pick(pool, "qwen"); u != nil || why != because.StaleMetrics {
		t.Errorf("stale metrics, saturated by default: %v %q", u, why)
	}
	g.Settings.unknownOK = true
	if u, _, _ := g.pick(pool, "qwen"); u == nil {
		t.Error("stale metrics configured as ok: nothing selected")
	}
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func BenchmarkSelect16(b *testing.B) {
	g := &VLLMGroup{Settings: Settings{maxNumSeqs: 64, maxQueue: 8, StaleAfter: time.Hour}, Endpoints: map[string]*Endpoint{}, byUpstream: map[*reverseproxy.Upstream]*Endpoint{},
		clock: clock.System}
	var pool reverseproxy.UpstreamPool
	for i := range 16 {
		dial := fmt.Sprintf("10.0.0.%d:8000", i+1)
		p := probe.New("http://"+dial, clock.System, zap.NewNop())
		l := &vllmmetrics.ModelLoad{Waiting: float64(i % 3), Running: float64(10 + i), KVUsage: 0.3}
		p.Update(func(s *probe.Snapshot) {
			*s = probe.Snapshot{
				Health:    probe.HealthUp,
				Models:    map[string]int{"qwen": 32768},
				Loads:     map[string]*vllmmetrics.ModelLoad{"qwen": l},
				Single:    l,
				MetricsAt: g.clock.Now(),
			}
		})
		u := &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: dial}
		g.Endpoints[dial] = &Endpoint{Dial: dial, Prober: p, weight: 1, Breaker: new(breaker.Breaker)}
		g.byUpstream[u] = g.Endpoints[dial]
		pool = append(pool, u)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		u, p, _ := g.pick(pool, "qwen")
		if u == nil {
			b.Fatal("nothing selected")
		}
		p.Inflight.Add(-1)
	}
}

// pick selects as the gateway's attempt would, returning the upstream,
// the prober holding the in-flight slot, and why nothing was selected.
func (g *VLLMGroup) pick(pool reverseproxy.UpstreamPool, model string) (*reverseproxy.Upstream, *probe.Prober, reason) {
	slot := &Slot{Group: g, Model: model}
	u := g.selectEndpoint(pool, slot)
	return u, slot.held, slot.Skip
}

// An endpoint whose breaker is open gets nothing; after the cooldown it
// gets exactly one trial request while the others carry the rest.
func TestEndpointBreakerInSelection(t *testing.T) {
	clk := fakeClock(t)
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, clk, 8, 0, a, b)
	g.Settings.unknownOK, g.Settings.Breakers = true, true
	cfg := &breaker.Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Minute)}
	for _, ep := range g.Endpoints {
		ep.Breaker = new(breaker.Breaker)
	}
	epA := g.Endpoints[a.Addr()]
	epA.Breaker.Failure(cfg, clk.Now(), breaker.Cause{})

	g.Endpoints[b.Addr()].Prober.Inflight.Add(5) // b busier: only the breaker keeps a out
	for range 3 {
		u, p, _ := g.pick(pool, "qwen")
		if u == nil || u.Dial != b.Addr() {
			t.Fatalf("selected %v with a's breaker open", u)
		}
		p.Inflight.Add(-1)
	}
	clk.Set(clk.Now().Add(time.Minute))
	slot := &Slot{Group: g, Model: "qwen"}
	if u := g.selectEndpoint(pool, slot); u == nil || u.Dial != a.Addr() || !slot.Trial {
		t.Fatalf("no half-open trial to a: %v trial=%v", u, slot.Trial)
	}
	// while the trial is in flight, a gets nothing more
	if u, _, _ := g.pick(pool, "qwen"); u == nil || u.Dial != b.Addr() {
		t.Fatalf("second request during a's trial went to %v", u)
	}
	epA.Breaker.TrialSucceeded()
	slot.Release()
	if u, _, _ := g.pick(pool, "qwen"); u == nil || u.Dial != a.Addr() {
		t.Errorf("a's breaker closed, yet %v was chosen", u)
	}
}

// A mirror's copy and a drill leave an endpoint's breaker as they found
// it: a copy never goes to an endpoint whose breaker is not closed (it
// would take the half-open trial, whose outcome nobody records, and the
// endpoint would get no request ever again); a drill goes through an open
// breaker and to a drained endpoint, without taking the trial, so that an
// endpoint can be tried before it is put back.
func TestCopiesAndDrillsLeaveTheBreakerAlone(t *testing.T) {
	clk := fakeClock(t)
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, clk, 8, 0, a)
	g.Settings.unknownOK, g.Settings.Breakers = true, true
	cfg := &breaker.Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Minute)}
	epA := g.Endpoints[a.Addr()]
	epA.Breaker = new(breaker.Breaker)
	epA.Breaker.Failure(cfg, clk.Now(), breaker.Cause{})

	for _, at := range []time.Duration{0, time.Minute} { // open, then past its cooldown
		clk.Set(clk.Now().Add(at))
		copySlot := &Slot{Group: g, Model: "qwen", Shadow: true}
		if u := g.selectEndpoint(pool, copySlot); u != nil || copySlot.Skip != because.BreakerOpen {
			t.Fatalf("+%v: a copy went to %v (skip %q) with the breaker not closed", at, u, copySlot.Skip)
		}
		for _, pin := range []string{"", a.Addr()} { // any endpoint, then this one
			drill := &Slot{Group: g, Model: "qwen", Drill: true, Pin: pin}
			if u := g.selectEndpoint(pool, drill); u == nil || drill.Trial {
				t.Fatalf("+%v: the drill (pinned to %q) got %v, trial %v", at, pin, u, drill.Trial)
			}
			drill.Release()
		}
	}
	// the trial is still there for a real request, which closes the breaker
	slot := &Slot{Group: g, Model: "qwen"}
	if u := g.selectEndpoint(pool, slot); u == nil || !slot.Trial {
		t.Fatalf("no half-open trial left for a real request: %v trial=%v", u, slot.Trial)
	}
	epA.Breaker.TrialSucceeded()
	slot.Release()
	copySlot := &Slot{Group: g, Model: "qwen", Shadow: true}
	if u := g.selectEndpoint(pool, copySlot); u == nil {
		t.Fatalf("a copy found no endpoint once the breaker closed: %q", copySlot.Skip)
	}
	copySlot.Release()

	// drained: real requests and copies stay away; a drill goes there
	// only when nothing else serves
	epA.Drained = new(atomic.Bool)
	epA.Drained.Store(true)
	if u, _, why := g.pick(pool, "qwen"); u != nil || why != because.Drained {
		t.Fatalf("a drained endpoint got %v (%q)", u, why)
	}
	copySlot = &Slot{Group: g, Model: "qwen", Shadow: true}
	if u := g.selectEndpoint(pool, copySlot); u != nil || copySlot.Skip != because.Drained {
		t.Fatalf("a copy went to the drained endpoint: %v (%q)", u, copySlot.Skip)
	}
	drill := &Slot{Group: g, Model: "qwen", Drill: true}
	if u := g.selectEndpoint(pool, drill); u == nil {
		t.Fatalf("the drill could not reach the drained endpoint: %q", drill.Skip)
	}
	drill.Release()
	_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g2, pool2 := testGroup(t, clk, 8, 0, a, b)
	g2.Settings.unknownOK = true
	g2.Endpoints[a.Addr()].Drained = epA.Drained
	g2.Endpoints[b.Addr()].Prober.Inflight.Add(3) // busier, yet serving
	drill = &Slot{Group: g2, Model: "qwen", Drill: true}
	if u := g2.selectEndpoint(pool2, drill); u == nil || u.Dial != b.Addr() {
		t.Fatalf("the drill went to %v rather than the endpoint that serves", u)
	}
	drill.Release()
	// the drill of each endpoint in turn: pinned, it goes to the drained
	// one, though another serves
	drill = &Slot{Group: g2, Model: "qwen", Drill: true, Pin: a.Addr()}
	if u := g2.selectEndpoint(pool2, drill); u == nil || u.Dial != a.Addr() {
		t.Fatalf("the drill pinned to %s went to %v (%q)", a.Addr(), u, drill.Skip)
	}
	drill.Release()
}

// An upstream of a vLLM group that cannot be probed (a unix socket, a
// placeholder) is "balanced on in-flight counts only", as the start-up
// warning says: it gets requests, here once the probed one is at its red
// line.
func TestUnprobedUpstreamOfAVLLMGroupGetsRequests(t *testing.T) {
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, fakeClock(t), 1, 0, a)
	g.Settings.unknownOK = true
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
	if n := g.Endpoints[a.Addr()].Prober.Inflight.Load(); n != 1 {
		t.Errorf("the probed endpoint holds %d slots, want 1", n)
	}
}

// An endpoint whose breaker opened on a refused connection gets its
// half-open trial as soon as its health probe has passed `rise` times in
// a row since, long before the cooldown ends; one that failed with an
// answer (a 500, its probe passing all along) waits out the cooldown.
func TestProbesEndACooldownOpenedOnConnectionFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conn    bool
		uneject bool
		want    bool
	}{
		{"refused", true, true, true},
		{"500 answers", false, true, false},
		{"uneject_on_probe off", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := fakeClock(t)
			_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
			_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
			g, pool := testGroup(t, clk, 8, 0, a, b)
			g.Settings.unknownOK, g.Settings.Breakers, g.Settings.uneject, g.Settings.rise = true, true, tc.uneject, 2
			cfg := &breaker.Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Hour)}
			for _, ep := range g.Endpoints {
				ep.Breaker = new(breaker.Breaker)
			}
			epA := g.Endpoints[a.Addr()]
			probeAll(g)
			epA.Breaker.Failure(cfg, clk.Now(), breaker.Cause{Conn: tc.conn, Probe: epA.Prober.HealthSeq()})
			g.Endpoints[b.Addr()].Prober.Inflight.Add(5) // b busier: only the breaker keeps a out

			epA.Prober.ProbeHealth(context.Background()) // one pass is not rise 2
			if u, p, _ := g.pick(pool, "qwen"); u == nil || u.Dial != b.Addr() {
				t.Fatalf("after one passed probe: %v", u)
			} else {
				p.Inflight.Add(-1)
			}
			epA.Prober.ProbeHealth(context.Background())
			slot := &Slot{Group: g, Model: "qwen"}
			u := g.selectEndpoint(pool, slot)
			if got := u != nil && u.Dial == a.Addr() && slot.Trial; got != tc.want {
				t.Errorf("after two passed probes, a's trial: %v, want %v (selected %v)", got, tc.want, u)
			}
		})
	}
}

// A 429 with Retry-After keeps its endpoint out for that long, capped at
// a minute; without Retry-After it is no hold.
func TestRetryAfterHoldsTheEndpoint(t *testing.T) {
	clk := fakeClock(t)
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
	g, pool := testGroup(t, clk, 8, 0, a, b)
	g.Settings.unknownOK = true
	for _, ep := range g.Endpoints {
		ep.Breaker = new(breaker.Breaker)
	}
	epA := g.Endpoints[a.Addr()]
	g.Endpoints[b.Addr()].Prober.Inflight.Add(5) // b busier: only the hold keeps a out
	pickA := func() bool {
		u, p, _ := g.pick(pool, "qwen")
		p.Inflight.Add(-1)
		return u.Dial == a.Addr()
	}

	if epA.Breaker.HoldFor(0, clk.Now()) || !pickA() {
		t.Fatal("a 429 without Retry-After held the endpoint")
	}
	if !epA.Breaker.HoldFor(time.Hour, clk.Now()) || pickA() {
		t.Fatal("Retry-After 3600: a still selected")
	}
	clk.Set(clk.Now().Add(59 * time.Second))
	if pickA() {
		t.Fatal("a selected before the capped hold ended")
	}
	clk.Set(clk.Now().Add(time.Second))
	if !pickA() {
		t.Fatal("a held beyond the 60s cap")
	}
	if !epA.Breaker.HoldFor(ratelimit.Asked(http.Header{"Retry-After": {clk.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)}}, clk.Now()), clk.Now()) || pickA() {
		t.Fatal("Retry-After as an HTTP date: a still selected")
	}
	g.Endpoints[b.Addr()].Breaker.Hold(clk.Now().Add(time.Minute)) // every endpoint held: the reason says so
	if u, _, why := g.pick(pool, "qwen"); u != nil || why != because.RateLimited {
		t.Errorf("every endpoint held: %v (%s)", u, why)
	}
}
