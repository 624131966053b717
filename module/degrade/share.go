// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package degrade

import (
	"sync"
	"time"
)

const shareSlots = 12

// Share is the share of degraded answers among an alias's answered
// requests over a sliding window, in slots of a twelfth of it. It is safe
// for concurrent use.
type Share struct {
	mu    sync.Mutex
	width time.Duration
	slot  [shareSlots]shareSlot
	// degraded answers reserved and not yet answered: requests in
	// flight count against the cap from the moment they degrade
	pending int
}

type shareSlot struct {
	index              int64 // the slot's start, in widths since the epoch
	answered, degraded int
}

// NewShare returns an empty share over window.
func NewShare(window time.Duration) *Share {
	return &Share{width: max(window/shareSlots, time.Millisecond)}
}

// Add counts an answered request at t, degraded or not.
func (s *Share) Add(t time.Time, degraded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := t.UnixNano()/int64(s.width) + 1
	sl := &s.slot[idx%shareSlots]
	if sl.index != idx {
		*sl = shareSlot{index: idx}
	}
	sl.answered++
	if degraded {
		sl.degraded++
	}
}

// At returns the answered and degraded requests of the window before t.
func (s *Share) At(t time.Time) (answered, degraded int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at(t)
}

func (s *Share) at(t time.Time) (answered, degraded int) {
	idx := t.UnixNano()/int64(s.width) + 1
	for _, sl := range s.slot {
		if sl.index > idx-shareSlots && sl.index <= idx {
			answered += sl.answered
			degraded += sl.degraded
		}
	}
	return answered, degraded
}

// Ratio returns the share of degraded answers in the window before t; 0
// without answers.
func (s *Share) Ratio(t time.Time) float64 {
	a, d := s.At(t)
	if a == 0 {
		return 0
	}
	return float64(d) / float64(a)
}

// Allows reports whether one more degraded answer at t keeps the share
// at or under limit, the reserved ones counted. The first answers of a
// window are judged as if the window held minAnswers, so that one
// degraded answer of an idle alias is not a share of 100 %.
func (s *Share) Allows(t time.Time, limit float64, minAnswers int) bool {
	if limit >= 1 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fits(t, limit, minAnswers)
}

func (s *Share) fits(t time.Time, limit float64, minAnswers int) bool {
	a, d := s.at(t)
	return float64(d+s.pending+1) <= limit*float64(max(a+s.pending+1, minAnswers))
}

// Reserve takes a degraded answer's place in the share at t if it keeps
// the share at or under limit, and reports whether it did. The place is
// given back with Release, once the request has ended (and been counted
// with Add, if answered).
func (s *Share) Reserve(t time.Time, limit float64, minAnswers int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit < 1 && !s.fits(t, limit, minAnswers) {
		return false
	}
	s.pending++
	return true
}

// Release gives back a reserved place.
func (s *Share) Release() {
	s.mu.Lock()
	s.pending--
	s.mu.Unlock()
}

// Judged returns the share of degraded answers in the window before t as
// the cap judges it: on minAnswers at least.
func (s *Share) Judged(t time.Time, minAnswers int) float64 {
	a, d := s.At(t)
	return float64(d) / float64(max(a, minAnswers, 1))
}
