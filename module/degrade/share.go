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
// at or under limit. The first answers of a window are judged as if the
// window held minAnswers, so that one degraded answer of an idle alias
// is not a share of 100 %.
func (s *Share) Allows(t time.Time, limit float64, minAnswers int) bool {
	if limit >= 1 {
		return true
	}
	a, d := s.At(t)
	return float64(d+1) <= limit*float64(max(a+1, minAnswers))
}
