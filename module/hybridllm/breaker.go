// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
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

	// Whether an endpoint breaker that opened on a connection failure
	// (refused, reset, dial error) gets its half-open trial as soon as
	// the endpoint's health probe has passed `rise` times in a row since,
	// rather than after the cooldown: a restarted vLLM is back as soon as
	// it answers. An endpoint that failed with an answer (5xx) waits out
	// the cooldown. Applies to the endpoints of vllm groups. Default: on.
	UnejectOnProbe *bool `json:"uneject_on_probe,omitempty"`
}

// unejectOnProbe reports whether probes may end an endpoint's cooldown.
func (bc *BreakerConfig) unejectOnProbe() bool {
	return bc.UnejectOnProbe == nil || *bc.UnejectOnProbe
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
	cause     failCause // of the failure that opened the breaker last

	// until when (unix nanoseconds) the endpoint asked to be left alone
	// with a 429 and Retry-After; independent of the breaker's state
	holdUntil atomic.Int64
}

// failCause is what a breaker keeps of the failure that opened it.
type failCause struct {
	conn  bool   // the upstream could not be reached (refused, reset, dial error)
	probe uint64 // the endpoint's count of health probes at the failure
}

// maxEndpointHold caps how long a 429's Retry-After keeps an endpoint out.
const maxEndpointHold = 60 * time.Second

// hold keeps the endpoint out until t (a 429 with Retry-After).
func (b *breaker) hold(t time.Time) {
	b.holdUntil.Store(t.UnixNano())
}

// holdFor keeps the endpoint out for a 429's Retry-After (as
// upstreamRetryAfter reads it, capped at maxEndpointHold) from time t. It
// reports whether the answer asked for a wait.
func (b *breaker) holdFor(wait time.Duration, t time.Time) bool {
	if wait <= 0 {
		return false
	}
	b.hold(t.Add(min(wait, maxEndpointHold)))
	return true
}

// held reports whether the endpoint asked to be left alone at time t.
func (b *breaker) held(t time.Time) bool {
	u := b.holdUntil.Load()
	return u != 0 && t.UnixNano() < u
}

// heldNow is held at the clock's time; it reads the clock only once a
// hold was set.
func (b *breaker) heldNow(c clock.Clock) bool {
	u := b.holdUntil.Load()
	return u != 0 && c.Now().UnixNano() < u
}

// uneject ends the cooldown of a breaker that opened on a connection
// failure once the endpoint's health probe has passed rise times in a row
// since that failure: the next request is its half-open trial. It
// reports whether the breaker may be tried now.
func (b *breaker) uneject(p *prober, rise int, t time.Time) bool {
	if b.state.Load() != breakerOpen {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() != breakerOpen || !b.cause.conn || !t.Before(b.openUntil) {
		return false
	}
	if p.healthPassedSince(b.cause.probe) < uint64(max(rise, 1)) {
		return false
	}
	b.openUntil = t
	return true
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

// trialSucceeded records the half-open trial's success, which closes the
// breaker. (Another request's success changes nothing.)
func (b *breaker) trialSucceeded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	b.state.Store(breakerClosed)
	b.fails = b.fails[:0]
}

// trialFailed records the half-open trial's failure at time t, which
// opens the breaker again: a full cooldown from t, not the old deadline.
func (b *breaker) trialFailed(cfg *BreakerConfig, t time.Time, cause failCause) {
	_, _, cool := cfg.params()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
	b.openUntil, b.cause = t.Add(cool), cause
	b.state.Store(breakerOpen)
	b.opened.Add(1)
}

// failure records the failure at time t of a request that was not the
// half-open trial. It reports whether the breaker opened.
func (b *breaker) failure(cfg *BreakerConfig, t time.Time, cause failCause) bool {
	allowed, win, cool := cfg.params()
	b.mu.Lock()
	defer b.mu.Unlock()
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
		b.openUntil, b.cause = t.Add(cool), cause
		b.state.Store(breakerOpen)
		b.opened.Add(1)
		return true
	}
	return false
}

// releaseTrial gives back the half-open trial, whose request ended
// without an outcome (the client left, say): the next request may try.
func (b *breaker) releaseTrial() {
	b.mu.Lock()
	b.trial = false
	b.mu.Unlock()
}

// view returns the breaker's state at time t and, while open, until
// when, and whether a half-open trial is in flight. An open breaker whose
// cooldown has passed reads half_open with no request yet: the next one
// is its trial. Nothing has to run for that: an idle gateway's state and
// metrics tell the truth.
func (b *breaker) view(t time.Time) (state string, until time.Time, trial bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerOpen:
		if t.Before(b.openUntil) {
			return "open", b.openUntil, false
		}
		return "half_open", time.Time{}, false
	case breakerHalfOpen:
		return "half_open", time.Time{}, b.trial
	}
	return "closed", time.Time{}, false
}

// judge feeds the verdict on a request that was not the half-open trial
// to a breaker, and logs it opening: only a failure counts.
func (rt *route) judge(b *breaker, bc *BreakerConfig, v verdict, group, endpoint string, cause failCause) {
	if v != verdictFailure {
		return
	}
	if t := rt.g.clock.Now(); b.failure(bc, t, cause) {
		_, until, _ := b.view(t)
		fields := []zap.Field{zap.String("group", group), zap.Time("until", until), zap.Bool("half_open_trial_failed", false)}
		if endpoint != "" {
			fields = append(fields, zap.String("endpoint", endpoint))
		}
		rt.g.logger.Warn("breaker open", fields...)
	}
}

// judgeTrial feeds the verdict on the half-open trial to its breaker,
// and logs what it did: a success closes it, a failure opens it again,
// and no verdict gives the trial to the next request.
func (rt *route) judgeTrial(b *breaker, bc *BreakerConfig, v verdict, group, endpoint string, cause failCause) {
	switch v {
	case verdictSuccess:
		b.trialSucceeded()
		fields := []zap.Field{zap.String("group", group)}
		if endpoint != "" {
			fields = append(fields, zap.String("endpoint", endpoint))
		}
		rt.g.logger.Info("breaker closed: the half-open trial succeeded", fields...)
	case verdictFailure:
		t := rt.g.clock.Now()
		b.trialFailed(bc, t, cause)
		_, until, _ := b.view(t)
		fields := []zap.Field{zap.String("group", group), zap.Time("until", until), zap.Bool("half_open_trial_failed", true)}
		if endpoint != "" {
			fields = append(fields, zap.String("endpoint", endpoint))
		}
		rt.g.logger.Warn("breaker open", fields...)
	default:
		b.releaseTrial()
	}
}

// connFailure reports whether a failure reason means the upstream could
// not be reached at all.
func connFailure(why reason) bool {
	switch why {
	case reasonConnRefused, reasonDial:
		return true
	}
	return false
}

// settle feeds an attempt's verdict to the breakers. The endpoint's
// breaker takes every verdict on its endpoint, except a 429 that asked
// for a wait (the hold keeps the endpoint out instead). The group's
// breaker takes a failure only when the group as a whole fails: an
// attempt on no known endpoint (an openai group, an unprobed upstream),
// or a request whose failures on this target span two endpoints or more
// (the retries before this attempt and the proxy's own retries within
// it). One bad replica thus opens its own breaker and leaves the others
// serving; a group whose endpoints are all out is skipped for that.
// The attempt carrying the group's half-open trial settles it; a failure
// that is the endpoint's alone gives the trial to the next request.
func (rt *route) settle(t *Target, bc *BreakerConfig, res *attemptResult, slot *attemptSlot, turn attemptTurn) {
	v := res.verdict
	if ep := res.ep; ep != nil {
		ev := v
		if res.held {
			ev = verdictNone
		}
		if slot.trial {
			rt.judgeTrial(ep.br, bc, ev, t.Group, ep.dial, res.cause)
		} else {
			rt.judge(ep.br, bc, ev, t.Group, ep.dial, res.cause)
		}
		if v == verdictFailure && len(turn.avoid)+slot.failed < 1 {
			v = verdictNone
		}
	}
	if res.held {
		v = verdictNone // busy, not broken
	}
	switch {
	case turn.groupTrial:
		rt.judgeTrial(&t.group.shared.breaker, bc, v, t.Group, "", failCause{})
	case v != verdictNone:
		rt.judge(&t.group.shared.breaker, bc, v, t.Group, "", failCause{})
	}
}
