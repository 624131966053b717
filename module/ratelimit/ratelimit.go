// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package ratelimit keeps a per-minute limit (a client's requests, or its
// tokens, a minute) as a generic cell rate (GCRA): one atomic word, the
// time at which the use so far would be paid off at the limit's pace. It
// lets a unit in while that is less than a minute ahead, and it knows
// when the next one may come. The limit is given at each call, so a
// limit changed by a reload, or shared among a fleet, applies at once to
// the use kept. It is a leaf: it imports nothing of the product.
package ratelimit

import (
	"sync/atomic"
	"time"
)

// Minute is a per-minute limit's use. The zero Minute has no use; it is
// safe for concurrent use. perMinute, in each method, is the limit: 0 or
// less is none, and lets everything in.
type Minute struct {
	tat atomic.Int64 // unix nanoseconds
}

// window is the span a per-minute limit is counted over.
const window = time.Minute

// Wait returns how long from t until the use is back under the limit (0:
// it is now).
func (l *Minute) Wait(perMinute int, t time.Time) time.Duration {
	if perMinute <= 0 {
		return 0
	}
	interval := window / time.Duration(perMinute)
	ahead := time.Duration(l.tat.Load() - t.UnixNano())
	return max(0, ahead+interval-window)
}

// Take lets in one unit (a request) at t if the limit allows, and reports
// how long to wait otherwise.
func (l *Minute) Take(perMinute int, t time.Time) time.Duration {
	w, _ := l.Reserve(perMinute, 1, t)
	return w
}

// Reserve lets in units (a request's tokens) at t if the limit has room
// for one more unit now, and reports how long to wait otherwise: what it
// lets in may go over the limit by at most those units. What it lets in
// is reserved until the time it returns, when the limit's pace has paid
// it off (see GiveBack); with no limit, that is the zero time.
func (l *Minute) Reserve(perMinute int, units int64, t time.Time) (wait time.Duration, until time.Time) {
	if perMinute <= 0 {
		return 0, time.Time{}
	}
	interval := int64(window / time.Duration(perMinute))
	n := t.UnixNano()
	for {
		tat := l.tat.Load()
		base := max(tat, n)
		if over := base + interval - n - int64(window); over > 0 {
			return time.Duration(over), time.Time{}
		}
		if next := base + interval*units; l.tat.CompareAndSwap(tat, next) {
			return 0, time.Unix(0, next)
		}
	}
}

// GiveBack returns at t the units a reservation took (at perMinute, and
// held until until) and did not use: only the part of it still ahead of
// t. The part that elapsed was paid off by the time that passed; giving
// it back too would take it from the reservations made after it, and let
// the use past its limit.
func (l *Minute) GiveBack(perMinute int, units int64, until, t time.Time) {
	if perMinute <= 0 || units <= 0 {
		return
	}
	back := min(int64(window/time.Duration(perMinute))*units, until.UnixNano()-t.UnixNano())
	if back > 0 {
		l.tat.Add(-back)
	}
}

// Charge adds units (tokens) used at t, after the fact (what a
// reservation did not use goes back through GiveBack).
func (l *Minute) Charge(perMinute int, units int64, t time.Time) {
	if perMinute <= 0 || units <= 0 {
		return
	}
	cost := int64(window/time.Duration(perMinute)) * units
	n := t.UnixNano()
	for {
		tat := l.tat.Load()
		if l.tat.CompareAndSwap(tat, max(tat, n)+cost) {
			return
		}
	}
}
