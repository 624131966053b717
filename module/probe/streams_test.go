// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"testing"

	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
)

// fakeStream is an answer under way whose reads the test moves.
type fakeStream struct {
	reads uint32
	ended bool
	cut   int
}

func (s *fakeStream) StreamReads() (uint32, bool) { return s.reads, !s.ended }
func (s *fakeStream) CutDown()                    { s.cut++ }

// A failed health probe notes where each answer is; once the endpoint is
// down, the next cuts those that read nothing since, and only those: one
// that moved, one in the middle of a read and one that ended are kept.
func TestDownEndpointCutsItsSilentStreams(t *testing.T) {
	p := New("http://127.0.0.1:1", clock.System, zap.NewNop())
	silent, moving, reading, ended := &fakeStream{reads: 4}, &fakeStream{reads: 4}, &fakeStream{reads: 4}, &fakeStream{reads: 4}
	for i, s := range []*fakeStream{silent, moving, reading, ended} {
		p.Watch(s, uint8(i*3)) // any shard number, taken modulo Shards
	}
	if n := p.Watched(); n != 4 {
		t.Fatalf("%d answers registered, want 4", n)
	}

	p.markStreams() // a failed probe, the endpoint still up
	moving.reads += 2
	reading.reads++ // odd: a read under way
	ended.ended = true
	p.cutStreams() // the endpoint is down
	if silent.cut != 1 || moving.cut != 0 || reading.cut != 0 || ended.cut != 0 {
		t.Errorf("cuts: silent %d, moving %d, reading %d, ended %d; want 1, 0, 0, 0", silent.cut, moving.cut, reading.cut, ended.cut)
	}

	// a new answer is never cut on its first failed probe
	fresh := &fakeStream{}
	p.Watch(fresh, 1)
	p.cutStreams()
	if fresh.cut != 0 {
		t.Error("an answer registered after the last failed probe was cut")
	}

	for i, s := range []*fakeStream{silent, moving, reading, ended} {
		p.Unwatch(s, uint8(i*3))
	}
	p.Unwatch(fresh, 1)
	if n := p.Watched(); n != 0 {
		t.Errorf("%d answers left registered", n)
	}
}
