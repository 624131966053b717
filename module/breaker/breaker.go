// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package breaker is the gateway's circuit breaker: failures within a
// window open it for a cooldown, one half-open trial decides whether it
// closes, and an upstream's 429 with Retry-After holds it out for that
// long without counting as a failure. A Breaker is safe for concurrent
// use and lives in state that outlives config reloads; it is told the
// time, never reads it, so tests drive it by hand. It is a leaf: it
// imports nothing of the product but its clock.
package breaker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
)

// States of a breaker.
const (
	closed int32 = iota
	open
	halfOpen
)

// Breaker is the state of one breaker. The zero value is closed.
type Breaker struct {
	state     atomic.Int32
	mu        sync.Mutex
	fails     []time.Time
	openUntil time.Time
	trial     bool // the half-open trial request is in flight
	opened    atomic.Int64
	cause     Cause // of the failure that opened the breaker last

	// until when (unix nanoseconds) the upstream asked to be left alone
	// with a 429 and Retry-After; independent of the breaker's state
	holdUntil atomic.Int64
}

// Cause is what a breaker keeps of the failure that opened it.
type Cause struct {
	// The upstream could not be reached (refused, reset, dial error).
	Conn bool
	// The endpoint's count of health probes at the failure.
	Probe uint64
}

// Probes counts an endpoint's health probes.
type Probes interface {
	// HealthPassedSince returns how many health probes in a row have
	// passed after the probe numbered mark.
	HealthPassedSince(mark uint64) uint64
}

// MaxHold caps how long a 429's Retry-After keeps an upstream out.
const MaxHold = 60 * time.Second

// Hold keeps the upstream out until t.
func (b *Breaker) Hold(t time.Time) {
	b.holdUntil.Store(t.UnixNano())
}

// HoldFor keeps the upstream out for a 429's Retry-After (capped at
// MaxHold) from time t. It reports whether the answer asked for a wait.
func (b *Breaker) HoldFor(wait time.Duration, t time.Time) bool {
	if wait <= 0 {
		return false
	}
	b.Hold(t.Add(min(wait, MaxHold)))
	return true
}

// Held reports whether the upstream asked to be left alone at time t.
func (b *Breaker) Held(t time.Time) bool {
	u := b.holdUntil.Load()
	return u != 0 && t.UnixNano() < u
}

// HeldNow is Held at the clock's time; it reads the clock only once a
// hold was set.
func (b *Breaker) HeldNow(c clock.Clock) bool {
	u := b.holdUntil.Load()
	return u != 0 && c.Now().UnixNano() < u
}

// HeldUntil returns the end of the hold and whether it is after t.
func (b *Breaker) HeldUntil(t time.Time) (time.Time, bool) {
	u := b.holdUntil.Load()
	if u <= t.UnixNano() {
		return time.Time{}, false
	}
	return time.Unix(0, u), true
}

// Closed reports whether the breaker is closed; a breaker whose cooldown
// has passed but whose trial has not been taken is not.
func (b *Breaker) Closed() bool { return b.state.Load() == closed }

// Opened returns how many times the breaker opened.
func (b *Breaker) Opened() int64 { return b.opened.Load() }

// Uneject ends the cooldown of a breaker that opened on a connection
// failure once the endpoint's health probe has passed rise times in a row
// since that failure: the next request is its half-open trial. It reports
// whether the breaker may be tried now.
func (b *Breaker) Uneject(p Probes, rise int, t time.Time) bool {
	if b.state.Load() != open {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != open || !b.cause.Conn || !t.Before(b.openUntil) {
		return false
	}
	if p.HealthPassedSince(b.cause.Probe) < uint64(max(rise, 1)) {
		return false
	}
	b.openUntil = t
	return true
}

// Allow reports whether a request may go through at time t, and whether
// it is the half-open trial (whose outcome decides the breaker).
func (b *Breaker) Allow(t time.Time) (ok, trial bool) {
	if b.state.Load() == closed {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case closed:
		return true, false
	case open:
		if t.Before(b.openUntil) {
			return false, false
		}
		b.state.Store(halfOpen)
		fallthrough
	default: // half-open
		if b.trial {
			return false, false
		}
		b.trial = true
		return true, true
	}
}

// WouldAllow is Allow without taking the trial.
func (b *Breaker) WouldAllow(t time.Time) bool {
	if b.state.Load() == closed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case open:
		return !t.Before(b.openUntil)
	case halfOpen:
		return !b.trial
	}
	return true
}

// TrialSucceeded records the half-open trial's success, which closes the
// breaker. (Another request's success changes nothing.)
func (b *Breaker) TrialSucceeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	b.state.Store(closed)
	b.fails = b.fails[:0]
}

// TrialFailed records the half-open trial's failure at time t, which
// opens the breaker again: a full cooldown from t, not the old deadline.
func (b *Breaker) TrialFailed(cfg *Config, t time.Time, cause Cause) {
	_, _, cool := cfg.Params()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	b.openUntil, b.cause = t.Add(cool), cause
	b.state.Store(open)
	b.opened.Add(1)
}

// Failure records the failure at time t of a request that was not the
// half-open trial. It reports whether the breaker opened.
func (b *Breaker) Failure(cfg *Config, t time.Time, cause Cause) bool {
	allowed, win, cool := cfg.Params()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != closed {
		// a late failure of a request sent before the breaker opened: the
		// cooldown already answered it, and only the trial decides now
		return false
	}
	keep := b.fails[:0]
	for _, f := range b.fails {
		if t.Sub(f) < win {
			keep = append(keep, f)
		}
	}
	b.fails = append(keep, t)
	if len(b.fails) >= allowed {
		b.fails = b.fails[:0]
		b.openUntil, b.cause = t.Add(cool), cause
		b.state.Store(open)
		b.opened.Add(1)
		return true
	}
	return false
}

// ReleaseTrial gives back the half-open trial, whose request ended
// without an outcome (the client left, say): the next request may try.
func (b *Breaker) ReleaseTrial() {
	b.mu.Lock()
	b.trial = false
	b.mu.Unlock()
}

// View returns the breaker's state at time t ("closed", "open" or
// "half_open") and, while open, until when, and whether a half-open trial
// is in flight. An open breaker whose cooldown has passed reads half_open
// with no request yet: the next one is its trial. Nothing has to run for
// that: an idle gateway's state and metrics tell the truth.
func (b *Breaker) View(t time.Time) (state string, until time.Time, trial bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case open:
		if t.Before(b.openUntil) {
			return "open", b.openUntil, false
		}
		return "half_open", time.Time{}, false
	case halfOpen:
		return "half_open", time.Time{}, b.trial
	}
	return "closed", time.Time{}, false
}
