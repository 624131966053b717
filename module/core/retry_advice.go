// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/http"
	"strings"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/ratelimit"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// OpenAI's SDKs retry 408, 409, 429 and every 5xx on their own, unless the
// answer says `x-should-retry: false`, and wait as long as `Retry-After`
// says. The gateway's own error answers say which applies, so that a
// client does not walk every target again when that cannot help, and
// waits for the nearest target to be back when it can.

const (
	// defaultRetryAfter is the wait advised for a busy target that gave
	// no time of its own.
	defaultRetryAfter = time.Second
	// maxRetryAfter caps any advised wait.
	maxRetryAfter = ratelimit.MaxRetryAfter
)

// retryAdvice judges the failed attempts of a request no target answered:
// never when a retry cannot help (every target refused for good: the
// gateway's configuration, the request's size or shape), otherwise the
// time until the nearest target may serve when every one that can is
// only busy (overloaded, past its red line, overflowing, its breaker
// open), else neither (the client's own backoff applies).
func retryAdvice(attempts []routing.Attempt, t0 time.Time) (never bool, after time.Duration) {
	if len(attempts) == 0 {
		return false, 0
	}
	never, busy := true, true
	for i := range attempts {
		a := &attempts[i]
		if permanentFailure(a) {
			continue
		}
		never = false
		w := a.Wait
		switch {
		case w > 0:
		case a.Reason == because.BreakerOpen:
			w = breakerWait(a.Target, t0)
		case a.Reason == because.RateLimited:
			w = holdWait(a.Target, t0)
		case a.Reason == because.RedLine, a.Reason == because.ClassReserve, a.Reason == because.Sheddable, a.Reason == because.Overflow, a.Reason == because.Degraded,
			a.Reason == because.BudgetHeld, a.Reason == because.SpendCapHeld,
			a.Status == http.StatusTooManyRequests, a.Status == http.StatusServiceUnavailable:
			w = defaultRetryAfter
		default:
			busy = false
		}
		if after == 0 || w < after {
			after = w
		}
	}
	if never || !busy {
		return never, 0
	}
	return false, after
}

// permanentFailure reports whether a target refused the request in a way
// a retry does not change: it is misconfigured, refuses the gateway's
// credentials, does not know the model or path, answered another 4xx the
// target falls back on, or its context window is too small.
func permanentFailure(a *routing.Attempt) bool {
	switch a.Reason {
	case because.Misconfig, because.ContextWindow, because.ContextLength, because.UpstreamAuth, because.ModelNotFound, because.NotAPI,
		because.ProtocolUnsupported, because.PreviousResponseMissing:
		return true
	}
	if !strings.HasPrefix(string(a.Reason), "http_4") {
		return false
	}
	switch a.Status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return true
}

// breakerWait is the time until the target's group, or the first of its
// endpoints, may take a request again.
func breakerWait(t *routing.Target, t0 time.Time) time.Duration {
	grp := t.Upstream
	if grp.Breaker != nil {
		if st, until, _ := grp.Shared.Breaker.View(t0); st == "open" {
			return until.Sub(t0)
		}
	}
	var w time.Duration
	if vg := grp.VLLM; vg != nil && vg.Settings.Breakers {
		for ep := range vg.All() {
			if st, until, _ := ep.Breaker.View(t0); st == "open" {
				if d := until.Sub(t0); w == 0 || d < w {
					w = d
				}
			}
		}
	}
	if w == 0 {
		w = defaultRetryAfter // half-open: a trial is deciding now
	}
	return w
}

// holdWait is the time until the target's cloud group, or the first
// endpoint of its vLLM group, that an upstream's 429 holds out may take a
// request again.
func holdWait(t *routing.Target, t0 time.Time) time.Duration {
	var w time.Duration
	if u, ok := t.Upstream.Shared.Breaker.HeldUntil(t0); ok {
		w = u.Sub(t0) // a cloud group's
	}
	if vg := t.Upstream.VLLM; vg != nil {
		for ep := range vg.All() {
			if u, ok := ep.Breaker.HeldUntil(t0); ok {
				if d := u.Sub(t0); w == 0 || d < w {
					w = d
				}
			}
		}
	}
	if w == 0 {
		w = defaultRetryAfter
	}
	return w
}
