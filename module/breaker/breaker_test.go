// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package breaker

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
)

var t0 = time.Unix(1000, 0)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestOpenHalfOpenClosed(t *testing.T) {
	cfg := &Config{AllowedFails: 3, Window: caddy.Duration(10 * time.Second), Cooldown: caddy.Duration(30 * time.Second)}
	b := new(Breaker)

	// two failures, one outside the window: still closed
	b.Failure(cfg, at(0), Cause{})
	b.Failure(cfg, at(11), Cause{})
	if ok, _ := b.Allow(at(12)); !ok {
		t.Fatal("opened with failures spread over more than the window")
	}
	b.Failure(cfg, at(12), Cause{})
	if opened := b.Failure(cfg, at(13), Cause{}); !opened {
		t.Fatal("3 failures within 10s did not open")
	}
	if ok, _ := b.Allow(at(20)); ok || b.Closed() {
		t.Fatal("open breaker let a request through")
	}
	if ok, _ := b.Allow(at(42)); ok {
		t.Fatal("let through before the cooldown ended (opened at 13, cooldown 30)")
	}
	if !b.WouldAllow(at(43)) {
		t.Fatal("WouldAllow: no trial after the cooldown")
	}
	ok, trial := b.Allow(at(43))
	if !ok || !trial {
		t.Fatal("no half-open trial after the cooldown")
	}
	if ok, _ := b.Allow(at(43)); ok || b.WouldAllow(at(43)) {
		t.Fatal("a second request during the half-open trial")
	}
	if s, _, inFlight := b.View(at(43)); s != "half_open" || !inFlight {
		t.Fatalf("during the trial: %s, trial in flight %v", s, inFlight)
	}
	b.TrialSucceeded()
	if s, _, _ := b.View(at(43)); s != "closed" || !b.Closed() {
		t.Fatalf("trial success left it %s", s)
	}
	if ok, trial := b.Allow(at(44)); !ok || trial {
		t.Fatal("closed breaker does not let requests through")
	}
}

func TestDefaults(t *testing.T) {
	n, win, cool := new(Config).Params()
	if n != 3 || win != time.Minute || cool != 30*time.Second {
		t.Errorf("defaults %d %v %v", n, win, cool)
	}
	if !new(Config).ProbesEndCooldown() {
		t.Error("uneject_on_probe is on by default")
	}
	if err := (&Config{Cooldown: -1}).Validate(); err == nil {
		t.Error("a negative cooldown accepted")
	}
}

func TestReopenExtendsDeadline(t *testing.T) {
	cfg := &Config{AllowedFails: 1, Cooldown: caddy.Duration(30 * time.Second)}
	b := new(Breaker)
	b.Failure(cfg, t0, Cause{}) // open until t0+30
	if _, until, _ := b.View(t0); !until.Equal(at(30)) {
		t.Fatalf("open until %v", until)
	}
	// the trial comes late, at t0+50, and fails
	if ok, trial := b.Allow(at(50)); !ok || !trial {
		t.Fatal("no trial")
	}
	if ch := b.Settle(cfg, Verdict{Outcome: Failure, Trial: true}, at(52)); ch != Reopened {
		t.Fatalf("a failed trial: %v", ch)
	}
	state, until, _ := b.View(at(52))
	if state != "open" || !until.Equal(at(82)) {
		t.Fatalf("re-opened %s until %v, want a full cooldown from the failure (t0+82s)", state, until)
	}
	if ok, _ := b.Allow(at(81)); ok {
		t.Fatal("let through before the extended deadline")
	}
	if ok, trial := b.Allow(at(82)); !ok || !trial {
		t.Fatal("no trial after the extended cooldown")
	}
	if b.Opened() != 2 {
		t.Errorf("opened %d times", b.Opened())
	}
}

// A request sent before the breaker opened may fail during the half-open
// trial: only the trial decides.
func TestLateFailureDuringTrial(t *testing.T) {
	b, cfg := openOnTrial(t)
	if ch := b.Settle(cfg, Verdict{Outcome: Failure}, at(3)); ch != Kept {
		t.Fatalf("a late failure under the trial: %v", ch)
	}
	if ok, _ := b.Allow(at(3)); ok {
		t.Fatal("a second request while the trial is in flight")
	}
	if ch := b.Settle(cfg, Verdict{Outcome: Success, Trial: true}, at(3)); ch != Closed {
		t.Fatalf("the trial's success: %v", ch)
	}
	if s, _, _ := b.View(at(3)); s != "closed" || b.Opened() != 1 {
		t.Fatalf("after the trial's success: %s, opened %d times", s, b.Opened())
	}
}

// A trial whose request ended without an outcome (the client left) is
// offered to the next request; a success that is not the trial's changes
// nothing.
func TestTrialReleased(t *testing.T) {
	b, cfg := openOnTrial(t)
	if ch := b.Settle(cfg, Verdict{Outcome: None, Trial: true}, at(2)); ch != Kept {
		t.Fatalf("no outcome: %v", ch)
	}
	if ok, trial := b.Allow(at(2)); !ok || !trial {
		t.Fatal("a released trial was not offered again")
	}
	if ch := b.Settle(cfg, Verdict{Outcome: Success}, at(2)); ch != Kept || b.Closed() {
		t.Fatalf("another request's success closed the breaker: %v", ch)
	}
}

// openOnTrial returns a breaker opened by one failure at t0 (cooldown 1s)
// whose half-open trial was taken at t0+2s.
func openOnTrial(t *testing.T) (*Breaker, *Config) {
	t.Helper()
	cfg := &Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Second)}
	b := new(Breaker)
	if ch := b.Settle(cfg, Verdict{Outcome: Failure}, t0); ch != Opened {
		t.Fatalf("one failure of one allowed: %v", ch)
	}
	if ok, trial := b.Allow(at(2)); !ok || !trial {
		t.Fatal("no trial")
	}
	return b, cfg
}

// A 429's Retry-After keeps the upstream out for that long, at most
// MaxHold, whatever the breaker's state.
func TestHold(t *testing.T) {
	b := new(Breaker)
	if b.HoldFor(0, t0) || b.Held(t0) {
		t.Fatal("a 429 without Retry-After held the upstream")
	}
	if !b.HoldFor(5*time.Second, t0) || !b.Held(at(4)) || b.Held(at(5)) {
		t.Fatal("Retry-After 5 did not hold for 5s")
	}
	if u, ok := b.HeldUntil(at(1)); !ok || !u.Equal(at(5)) {
		t.Fatalf("held until %v %v", u, ok)
	}
	if _, ok := b.HeldUntil(at(5)); ok {
		t.Fatal("a hold past its end still reported")
	}
	b.HoldFor(time.Hour, t0)
	if !b.Held(t0.Add(MaxHold-time.Second)) || b.Held(t0.Add(MaxHold)) {
		t.Fatal("a long Retry-After is not capped at MaxHold")
	}
	c := clock.NewManual(t0)
	if !b.HeldNow(c) || !b.Closed() {
		t.Fatal("HeldNow, or the hold touched the breaker's state")
	}
}

type probes uint64

func (p probes) HealthPassedSince(mark uint64) uint64 { return uint64(p) - min(mark, uint64(p)) }

// A breaker opened on a refused connection is tried as soon as the
// endpoint's probes passed rise times since; one opened on a 5xx waits
// out its cooldown.
func TestUneject(t *testing.T) {
	cfg := &Config{AllowedFails: 1, Cooldown: caddy.Duration(time.Minute)}
	refused, answered := new(Breaker), new(Breaker)
	refused.Failure(cfg, t0, Cause{Conn: true, Probe: 10})
	answered.Failure(cfg, t0, Cause{Probe: 10})
	if refused.Uneject(probes(11), 2, at(1)) {
		t.Fatal("tried after one passed probe of rise 2")
	}
	if !refused.Uneject(probes(12), 2, at(1)) {
		t.Fatal("not tried after rise probes passed")
	}
	if ok, trial := refused.Allow(at(1)); !ok || !trial {
		t.Fatal("the unejected breaker gave no trial")
	}
	if answered.Uneject(probes(100), 2, at(1)) {
		t.Fatal("a breaker opened on an answer cut its cooldown short")
	}
}
