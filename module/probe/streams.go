// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import "sync"

// Stream is an answer under way from an endpoint, as its probes see it:
// registered with Watch from its response head to its end, it is cut when
// the health probes take the endpoint down and it has read nothing since
// the failed probe before, which a frozen vLLM would keep open and silent.
type Stream interface {
	// StreamReads returns the answer's body reads so far, counted twice
	// each (odd while one is under way); ok is false once it has ended.
	StreamReads() (reads uint32, ok bool)
	// CutDown ends the answer: its endpoint was taken down.
	CutDown()
}

// Shards is how many locks an endpoint's answers under way are
// registered under: with one, every answer's start and end queued on it
// at a few thousand requests a second. A stream names its shard (any
// number: it is taken modulo Shards); spreading them spreads the locks.
const Shards = 8

// streamShard is one share of an endpoint's answers under way, on a
// cache line of its own.
type streamShard struct {
	mu sync.Mutex
	// each answer's reads at the endpoint's last failed probe, plus one
	// (0: none yet)
	m map[Stream]uint64
	_ [48]byte
}

// Watch registers a started answer from the endpoint in the given shard,
// to be cut when the probes take the endpoint down. Unwatch, with the
// same shard, ends it.
func (p *Prober) Watch(s Stream, shard uint8) {
	sh := &p.streams[shard%Shards]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[Stream]uint64)
	}
	sh.m[s] = 0
	sh.mu.Unlock()
}

// Unwatch ends the registration Watch made.
func (p *Prober) Unwatch(s Stream, shard uint8) {
	sh := &p.streams[shard%Shards]
	sh.mu.Lock()
	delete(sh.m, s)
	sh.mu.Unlock()
}

// Watched returns how many answers under way are registered.
func (p *Prober) Watched() int {
	n := 0
	for i := range p.streams {
		sh := &p.streams[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// cutStreams runs on each failed health probe of an endpoint its probes
// took down: it cuts every answer under way from it that has read
// nothing since the last failed probe, and notes where each other answer
// is, for the next.
func (p *Prober) cutStreams() {
	for i := range p.streams {
		p.streams[i].cut()
	}
}

// markStreams runs on each failed health probe of an endpoint still up:
// it notes where each answer under way from it is, for the next (see
// cutStreams).
func (p *Prober) markStreams() {
	for i := range p.streams {
		p.streams[i].mark()
	}
}

// cut is cutStreams over one shard.
func (sh *streamShard) cut() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for s, at := range sh.m {
		r, ok := s.StreamReads()
		if !ok {
			continue
		}
		if r&1 == 0 && at == uint64(r)+1 {
			s.CutDown()
			continue
		}
		sh.m[s] = uint64(r) + 1
	}
}

// mark is markStreams over one shard.
func (sh *streamShard) mark() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for s := range sh.m {
		if r, ok := s.StreamReads(); ok {
			sh.m[s] = uint64(r) + 1
		}
	}
}
