// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"slices"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
)

func TestFaultLogOncePerState(t *testing.T) {
	var f faultLog
	a, b := faultKey{"10.0.0.1:8000", because.UpstreamAuth}, faultKey{"10.0.0.2:8000", because.ModelNotFound}
	if !f.start(a) || f.start(a) || !f.start(b) {
		t.Fatal("a fault must be new once, until it ends")
	}
	if got := f.end("10.0.0.1:8000"); !slices.Equal(got, []Reason{because.UpstreamAuth}) || f.n.Load() != 1 {
		t.Errorf("end: %v, %d held", got, f.n.Load())
	}
	if got := f.end("10.0.0.1:8000"); got != nil {
		t.Errorf("a second end: %v", got)
	}
	if !f.start(a) {
		t.Error("a fault that ended and came back is new")
	}
}
