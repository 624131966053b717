// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"slices"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"go.uber.org/zap"
)

func TestFaultLogOncePerState(t *testing.T) {
	var f faultLog
	a, b := faultKey{"10.0.0.1:8000", reasonUpstreamAuth}, faultKey{"10.0.0.2:8000", reasonModelNotFound}
	if !f.start(a) || f.start(a) || !f.start(b) {
		t.Fatal("a fault must be new once, until it ends")
	}
	if got := f.end("10.0.0.1:8000"); !slices.Equal(got, []reason{reasonUpstreamAuth}) || f.n.Load() != 1 {
		t.Errorf("end: %v, %d held", got, f.n.Load())
	}
	if got := f.end("10.0.0.1:8000"); got != nil {
		t.Errorf("a second end: %v", got)
	}
	if !f.start(a) {
		t.Error("a fault that ended and came back is new")
	}
}

func TestMarkMissing(t *testing.T) {
	p := newProber("http://127.0.0.1:1", clock.System, zap.NewNop())
	p.settings.Store(&probeSettings{expect: []string{"a", "b"}})

	// before any /v1/models answer: the other names still count as served
	p.markMissing("a")
	snap := p.snap.Load()
	if _, ok := snap.models["a"]; ok || !snap.anyMissing {
		t.Errorf("a still served: %v", snap.models)
	}
	if _, ok := snap.models["b"]; !ok {
		t.Errorf("b no longer served: %v", snap.models)
	}
	select {
	case <-p.wake[2]:
	default:
		t.Error("the /v1/models probe was not woken")
	}

	// after one: the name goes, the rest (and max_model_len) stay
	p.update(func(s *probeSnapshot) { s.models, s.anyMissing = map[string]int{"a": 4096, "b": 8192}, false })
	p.markMissing("b")
	snap = p.snap.Load()
	if len(snap.models) != 1 || snap.models["a"] != 4096 || !snap.anyMissing || !p.missed["b"] {
		t.Errorf("after marking b: %v any missing %v", snap.models, snap.anyMissing)
	}
}
