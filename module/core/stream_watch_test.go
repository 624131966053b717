// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// quietWatchdog is a watchdog of aw whose timer never fires by itself:
// the test looks (fire) in its place.
func quietWatchdog(t *testing.T, aw *attemptWriter) *watchdog {
	t.Helper()
	w := &watchdog{timer: time.AfterFunc(time.Hour, func() {})}
	t.Cleanup(func() { w.timer.Stop() })
	w.look.Store(int64(time.Hour))
	w.aw.Store(aw)
	return w
}

// An answer is cut after idleLooks looks in a row without a read; a read
// in between starts the count again, and so does a write to the client
// still under way (the client reads slowly, the upstream is not idle).
func TestWatchdogCutsASilentAnswer(t *testing.T) {
	canceled := 0
	aw := &attemptWriter{guard: answerGuard{cancel: func() { canceled++ }}}
	w := quietWatchdog(t, aw)
	looks := func(n int) {
		for range n {
			w.fire()
		}
	}
	looks(idleLooks - 1)
	aw.guard.reads.Add(2) // one write, done
	looks(idleLooks - 1)
	if aw.guard.cut.Load() != cutNone || canceled != 0 {
		t.Fatalf("cut after reads: %d, canceled %d", aw.guard.cut.Load(), canceled)
	}
	aw.guard.reads.Add(1) // a write blocked on the client
	looks(3 * idleLooks)
	if aw.guard.cut.Load() != cutNone {
		t.Fatal("cut while a write to the client was under way")
	}
	aw.guard.reads.Add(1) // it returned
	looks(idleLooks)
	if aw.guard.cut.Load() != cutNone {
		t.Fatal("cut at the look that saw the write return")
	}
	looks(idleLooks - 1)
	if aw.guard.cut.Load() != cutIdle || canceled != 1 {
		t.Fatalf("not cut after %d quiet looks: %d, canceled %d", idleLooks, aw.guard.cut.Load(), canceled)
	}
	// the first reason stays, and the attempt is canceled once
	aw.cutShort(cutDown)
	if aw.guard.cut.Load() != cutIdle || canceled != 1 {
		t.Errorf("a second cut: %d, canceled %d", aw.guard.cut.Load(), canceled)
	}
	// a released watchdog's late look does nothing
	w.aw.Store(nil)
	w.fire()
}

// The health probes that take an endpoint down cut the answers under way
// from it that read nothing since the probe before, and only those still
// registered; one still streaming is cut once it stops.
func TestEndpointDownCutsItsStreams(t *testing.T) {
	v, srv := simulator.StartVLLM(t, simulator.VLLMConfig{})
	p := probe.New(srv.URL(), clock.System, zap.NewNop())
	p.Register(t, probe.Settings{Timeout: 2 * time.Second, Rise: 1, Fall: 2})
	p.ProbeHealth(context.Background())
	if p.Snapshot().Health != probe.HealthUp {
		t.Fatal("not up")
	}
	var live, moving, done attemptWriter
	for _, aw := range []*attemptWriter{&live, &moving, &done} {
		aw.guard.cancel = func() {}
		aw.target = &routing.Target{} // no idle_timeout: the probes alone watch it
		aw.slot.Endpoint = &upstream.Endpoint{Prober: p}
		aw.watch()
		if aw.guard.dog == nil {
			t.Fatal("an answer from a vLLM endpoint is not watched")
		}
	}
	done.unwatch()
	v.SetHealthy(false)
	p.ProbeHealth(context.Background())
	if live.guard.cut.Load() != cutNone {
		t.Fatal("cut before the endpoint fell")
	}
	moving.guard.reads.Add(2) // a token came between the two failed probes
	p.ProbeHealth(context.Background())
	if live.guard.cut.Load() != cutDown || done.guard.cut.Load() != cutNone {
		t.Errorf("after the fall: live %d, done %d", live.guard.cut.Load(), done.guard.cut.Load())
	}
	if moving.guard.cut.Load() != cutNone {
		t.Error("an answer still streaming was cut when its endpoint fell")
	}
	// it stops too: the next failed probe cuts it
	p.ProbeHealth(context.Background())
	if moving.guard.cut.Load() != cutDown {
		t.Error("an answer that stopped on an endpoint down was not cut")
	}
	live.unwatch()
	moving.unwatch()
	if left := p.Watched(); left != 0 {
		t.Errorf("%d answers left registered", left)
	}
}

// BenchmarkAnswerWatch is what watching costs an answer from a vLLM
// endpoint with the default idle_timeout: the watchdog from its pool, its
// timer set and stopped, the endpoint's registration, and one body write's
// count.
func BenchmarkAnswerWatch(b *testing.B) {
	p := probe.New("http://127.0.0.1:1", clock.System, zap.NewNop())
	aw := &attemptWriter{target: &routing.Target{Run: routing.TargetRun{Idle: routing.DefaultIdleTimeout}}, guard: answerGuard{cancel: func() {}}}
	aw.slot.Endpoint = &upstream.Endpoint{Prober: p}
	b.ReportAllocs()
	for b.Loop() {
		aw.watch()
		aw.guard.reads.Add(1)
		aw.guard.reads.Add(1)
		aw.unwatch()
	}
}
