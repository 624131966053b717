// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestBreakerOpenHalfOpenClosed(t *testing.T) {
	cfg := &BreakerConfig{AllowedFails: 3, Window: caddy.Duration(10 * time.Second), Cooldown: caddy.Duration(30 * time.Second)}
	b := new(breaker)
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	// two failures, one outside the window: still closed
	b.failure(cfg, at(0), false, failCause{})
	b.failure(cfg, at(11), false, failCause{})
	if ok, _ := b.allow(at(12)); !ok {
		t.Fatal("opened with failures spread over more than the window")
	}
	b.failure(cfg, at(12), false, failCause{})
	if opened := b.failure(cfg, at(13), false, failCause{}); !opened {
		t.Fatal("3 failures within 10s did not open")
	}
	if ok, _ := b.allow(at(20)); ok {
		t.Fatal("open breaker let a request through")
	}
	if ok, _ := b.allow(at(42)); ok {
		t.Fatal("let through before the cooldown ended (opened at 13, cooldown 30)")
	}
	ok, trial := b.allow(at(43))
	if !ok || !trial {
		t.Fatal("no half-open trial after the cooldown")
	}
	if ok, _ := b.allow(at(43)); ok {
		t.Fatal("a second request during the half-open trial")
	}
	b.success(trial)
	if s, _ := b.view(); s != "closed" {
		t.Fatalf("trial success left it %s", s)
	}
	if ok, trial := b.allow(at(44)); !ok || trial {
		t.Fatal("closed breaker does not let requests through")
	}
}

func TestBreakerReopenExtendsDeadline(t *testing.T) {
	cfg := &BreakerConfig{AllowedFails: 1, Cooldown: caddy.Duration(30 * time.Second)}
	b := new(breaker)
	t0 := time.Unix(1000, 0)
	b.failure(cfg, t0, false, failCause{}) // open until t0+30
	_, until := b.view()
	if !until.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("open until %v", until)
	}
	// the trial comes late, at t0+50, and fails
	ok, trial := b.allow(t0.Add(50 * time.Second))
	if !ok || !trial {
		t.Fatal("no trial")
	}
	b.failure(cfg, t0.Add(52*time.Second), trial, failCause{})
	state, until := b.view()
	if state != "open" || !until.Equal(t0.Add(82*time.Second)) {
		t.Fatalf("re-opened %s until %v, want a full cooldown from the failure (t0+82s)", state, until)
	}
	if ok, _ := b.allow(t0.Add(81 * time.Second)); ok {
		t.Fatal("let through before the extended deadline")
	}
	if ok, trial := b.allow(t0.Add(82 * time.Second)); !ok || !trial {
		t.Fatal("no trial after the extended cooldown")
	}
	if b.opened.Load() != 2 {
		t.Errorf("opened %d times", b.opened.Load())
	}
}

// A request sent before the breaker opened may fail during the half-open
// trial: only the trial decides.
func TestBreakerLateFailureDuringTrial(t *testing.T) {
	b, cfg, t0, trial := halfOpen(t)
	if reopened := b.failure(cfg, t0.Add(3*time.Second), false, failCause{}); reopened {
		t.Fatal("a late failure re-opened the breaker under the trial")
	}
	if ok, _ := b.allow(t0.Add(3 * time.Second)); ok {
		t.Fatal("a second request while the trial is in flight")
	}
	b.success(trial)
	if s, _ := b.view(); s != "closed" || b.opened.Load() != 1 {
		t.Fatalf("after the trial's success: %s, opened %d times", s, b.opened.Load())
	}
}

func TestBreakerTrialReleased(t *testing.T) {
	b, _, t0, trial := halfOpen(t)
	b.release(trial) // the client left: no verdict
	if ok, trial := b.allow(t0.Add(2 * time.Second)); !ok || !trial {
		t.Fatal("a released trial was not offered again")
	}
}

// halfOpen returns a breaker opened by one failure at t0 (cooldown 1s)
// whose half-open trial was taken at t0+2s.
func halfOpen(t *testing.T) (b *breaker, cfg *BreakerConfig, t0 time.Time, trial bool) {
	t.Helper()
	cfg = &BreakerConfig{AllowedFails: 1, Cooldown: caddy.Duration(time.Second)}
	b, t0 = new(breaker), time.Unix(1000, 0)
	b.failure(cfg, t0, false, failCause{})
	ok, trial := b.allow(t0.Add(2 * time.Second))
	if !ok || !trial {
		t.Fatal("no trial")
	}
	return b, cfg, t0, trial
}
