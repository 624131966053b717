// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package healthscore is the arithmetic of health-score scheduling: the
// sliding window of one target's recent requests (error rate and p99
// latency), the alert / degrade / break levels with their gradual
// recovery, and how a weighted set's weights move away from sick members
// to healthy ones. Time is always an argument: nothing here reads a
// clock.
//
// It is a leaf: it imports nothing of the product.
package healthscore

import (
	"math"
	"time"
)

// Latencies are counted in buckets whose bounds grow by bucketGrowth
// from 1 ms: a p99 is read to within a few percent, and a window's state
// is a fixed size whatever its traffic.
const (
	slots        = 10
	bucketGrowth = 1.05
	buckets      = 300 // 1 ms × 1.05^299 ≈ 2.2e6 ms: past any attempt limit
)

var logGrowth = math.Log(bucketGrowth)

// Stats is what a window saw.
type Stats struct {
	Requests, Errors int
	ErrorRate        float64       // Errors / Requests; 0 without requests
	P50, P99         time.Duration // of the successful requests; 0 without one
}

// Window counts one target's requests over a sliding span, in slots of
// a tenth of it. The zero value is not usable; make one with NewWindow.
// It is not safe for concurrent use.
type Window struct {
	width time.Duration // of a slot
	slot  [slots]slot
	// the sum of the live slots' latency buckets, kept as slots come
	// and go, so that a quantile reads one histogram
	total [buckets]uint32
	n     int // successful requests in total
}

type slot struct {
	index      int64 // the slot's start, in widths since the epoch; 0: empty
	n, errs    uint32
	lat        [buckets]uint32
	successful uint32
}

// NewWindow returns an empty window over span.
func NewWindow(span time.Duration) *Window {
	w := max(span/slots, time.Millisecond)
	return &Window{width: w}
}

// Span is the window's length.
func (w *Window) Span() time.Duration { return w.width * slots }

// Add counts a request that ended at t: failed, or answered after
// latency.
func (w *Window) Add(t time.Time, failed bool, latency time.Duration) {
	s := w.at(t)
	s.n++
	if failed {
		s.errs++
		return
	}
	b := bucket(latency)
	s.lat[b]++
	s.successful++
	w.total[b]++
	w.n++
}

// Reset empties the window.
func (w *Window) Reset() {
	for i := range w.slot {
		w.drop(&w.slot[i])
	}
}

// Stats returns what the window saw in the span before t.
func (w *Window) Stats(t time.Time) Stats {
	w.expire(t)
	var st Stats
	for i := range w.slot {
		st.Requests += int(w.slot[i].n)
		st.Errors += int(w.slot[i].errs)
	}
	if st.Requests > 0 {
		st.ErrorRate = float64(st.Errors) / float64(st.Requests)
	}
	st.P50, st.P99 = w.quantile(0.5), w.quantile(0.99)
	return st
}

// at returns the slot for t, emptying an old one it reuses.
func (w *Window) at(t time.Time) *slot {
	idx := t.UnixNano()/int64(w.width) + 1 // never 0
	s := &w.slot[idx%slots]
	if s.index < idx { // a newer slot's data stays, should a late request land here
		w.drop(s)
		s.index = idx
	}
	return s
}

// expire empties the slots older than the span before t.
func (w *Window) expire(t time.Time) {
	idx := t.UnixNano()/int64(w.width) + 1
	for i := range w.slot {
		if s := &w.slot[i]; s.index != 0 && s.index <= idx-slots {
			w.drop(s)
		}
	}
}

func (w *Window) drop(s *slot) {
	if s.successful > 0 {
		for b, c := range s.lat {
			w.total[b] -= c
		}
		w.n -= int(s.successful)
	}
	*s = slot{}
}

// quantile returns the q-quantile of the successful latencies,
// interpolated within its bucket (geometrically, as its bounds grow).
func (w *Window) quantile(q float64) time.Duration {
	if w.n == 0 {
		return 0
	}
	rank := q * float64(w.n)
	seen := 0.0
	for b, c := range w.total {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo, hi := bounds(b)
			frac := (rank - seen) / float64(c)
			if lo == 0 {
				return time.Duration(frac * float64(hi))
			}
			return time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), frac))
		}
		seen += float64(c)
	}
	_, hi := bounds(buckets - 1)
	return hi
}

// bucket returns the bucket of a latency: 0 holds everything up to 1 ms,
// bucket b > 0 the latencies in (1.05^(b-1), 1.05^b] ms.
func bucket(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 1 {
		return 0
	}
	b := int(math.Ceil(math.Log(ms) / logGrowth))
	return min(max(b, 1), buckets-1)
}

// bounds returns a bucket's lower and upper bound.
func bounds(b int) (lo, hi time.Duration) {
	if b == 0 {
		return 0, time.Millisecond
	}
	ms := func(e int) time.Duration {
		return time.Duration(math.Pow(bucketGrowth, float64(e)) * float64(time.Millisecond))
	}
	return ms(b - 1), ms(b)
}
