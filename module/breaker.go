// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// BreakerConfig is a circuit breaker: allowed_fails failures within the
// window open it for the cooldown; after the cooldown one request is let
// through (half-open); its success closes the breaker, its failure opens
// it again for another full cooldown from that moment.
type BreakerConfig struct {
	// Failures within the window that open the breaker. Default: 3.
	AllowedFails int `json:"allowed_fails,omitempty"`

	// The window failures are counted in. Default: 60s.
	Window caddy.Duration `json:"window,omitempty"`

	// How long an open breaker stays open. Default: 30s.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`

	// How long the model behind the group takes to load after a
	// restart. Only used to warn: a cooldown shorter than the load time
	// lets traffic back before the model is ready, and the breaker
	// oscillates.
	LoadTime caddy.Duration `json:"load_time,omitempty"`
}

const (
	defaultAllowedFails = 3
	defaultBreakerWin   = 60 * time.Second
	defaultCooldown     = 30 * time.Second
)

func (bc *BreakerConfig) validate() error {
	if bc.AllowedFails < 0 || bc.Window < 0 || bc.Cooldown < 0 || bc.LoadTime < 0 {
		return fmt.Errorf("breaker values must not be negative")
	}
	return nil
}

func (bc *BreakerConfig) params() (int, time.Duration, time.Duration) {
	n, win, cool := bc.AllowedFails, time.Duration(bc.Window), time.Duration(bc.Cooldown)
	if n == 0 {
		n = defaultAllowedFails
	}
	if win == 0 {
		win = defaultBreakerWin
	}
	if cool == 0 {
		cool = defaultCooldown
	}
	return n, win, cool
}

// Breaker states.
const (
	breakerClosed int32 = iota
	breakerOpen
	breakerHalfOpen
)

// breaker is the state of one breaker; it lives in shared state so that
// it outlives config reloads.
type breaker struct {
	state     atomic.Int32
	mu        sync.Mutex
	fails     []time.Time
	openUntil time.Time
	trial     bool // the half-open trial request is in flight
	opened    atomic.Int64
}

// allow reports whether a request may go through at time t, and whether
// it is the half-open trial (whose outcome decides the breaker).
func (b *breaker) allow(t time.Time) (ok, trial bool) {
	if b.state.Load() == breakerClosed {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerClosed:
		return true, false
	case breakerOpen:
		if t.Before(b.openUntil) {
			return false, false
		}
		b.state.Store(breakerHalfOpen)
		fallthrough
	default: // half-open
		if b.trial {
			return false, false
		}
		b.trial = true
		return true, true
	}
}

// wouldAllow is allow without taking the trial.
func (b *breaker) wouldAllow(t time.Time) bool {
	if b.state.Load() == breakerClosed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerOpen:
		return !t.Before(b.openUntil)
	case breakerHalfOpen:
		return !b.trial
	}
	return true
}

// success records a successful request; a trial's success closes the
// breaker, which it reports.
func (b *breaker) success(trial bool) bool {
	if !trial && b.state.Load() == breakerClosed {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if trial {
		b.trial = false
		b.state.Store(breakerClosed)
		b.fails = b.fails[:0]
		return true
	}
	return false
}

// failure records a failed request at time t. It reports whether the
// breaker opened (or opened again).
func (b *breaker) failure(cfg *BreakerConfig, t time.Time, trial bool) bool {
	allowed, win, cool := cfg.params()
	b.mu.Lock()
	defer b.mu.Unlock()
	if trial {
		// the trial failed: a full cooldown from now, not the old deadline
		b.trial = false
		b.openUntil = t.Add(cool)
		b.state.Store(breakerOpen)
		b.opened.Add(1)
		return true
	}
	if b.state.Load() != breakerClosed {
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
		b.openUntil = t.Add(cool)
		b.state.Store(breakerOpen)
		b.opened.Add(1)
		return true
	}
	return false
}

// release gives back a trial whose request ended without an outcome (the
// client left, say): the next request may try.
func (b *breaker) release(trial bool) {
	if !trial {
		return
	}
	b.mu.Lock()
	b.trial = false
	b.mu.Unlock()
}

// view returns the state name and, when open, until when.
func (b *breaker) view() (string, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerOpen:
		return "open", b.openUntil
	case breakerHalfOpen:
		return "half_open", time.Time{}
	}
	return "closed", time.Time{}
}

// judge feeds a verdict to a breaker and logs it opening.
func (rt *route) judge(b *breaker, bc *BreakerConfig, v verdict, trial bool, group, endpoint string) {
	switch v {
	case verdictSuccess:
		if b.success(trial) {
			fields := []zap.Field{zap.String("group", group)}
			if endpoint != "" {
				fields = append(fields, zap.String("endpoint", endpoint))
			}
			rt.g.logger.Info("breaker closed: the half-open trial succeeded", fields...)
		}
	case verdictFailure:
		if b.failure(bc, now(), trial) {
			_, until := b.view()
			fields := []zap.Field{zap.String("group", group), zap.Time("until", until), zap.Bool("half_open_trial_failed", trial)}
			if endpoint != "" {
				fields = append(fields, zap.String("endpoint", endpoint))
			}
			rt.g.logger.Warn("breaker open", fields...)
		}
	default:
		b.release(trial)
	}
}
