// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

func TestRetryAdvice(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plain := &routing.Target{Group: "cloud", Upstream: &upstream.Group{Shared: &upstream.GroupState{}}}
	broken := &routing.Target{Group: "self", Upstream: &upstream.Group{Shared: &upstream.GroupState{}, Breaker: &routing.BreakerConfig{AllowedFails: 1, Cooldown: 0}}}
	broken.Upstream.Shared.Breaker.Failure(broken.Upstream.Breaker, t0.Add(-22500*time.Millisecond), breaker.Cause{}) // open until t0+7.5s
	held := &upstream.Endpoint{Breaker: new(breaker.Breaker)}
	held.Breaker.Hold(t0.Add(12 * time.Second)) // a 429's Retry-After
	limited := &routing.Target{Group: "self", Upstream: &upstream.Group{Shared: &upstream.GroupState{},
		VLLM: &upstream.VLLMGroup{Endpoints: map[string]*upstream.Endpoint{"a": held, "b": {Breaker: new(breaker.Breaker)}}}}}

	for _, tc := range []struct {
		name     string
		attempts []routing.Attempt
		never    bool
		after    time.Duration
	}{
		{"none", nil, false, 0},
		{"every target misconfigured or refusing the key", []routing.Attempt{
			{Target: broken, Reason: because.Misconfig},
			{Target: plain, Reason: because.UpstreamAuth, Status: 401},
		}, true, 0},
		{"too large everywhere", []routing.Attempt{
			{Target: broken, Reason: because.ContextLength, Status: 400},
			{Target: plain, Reason: because.ContextWindow},
		}, true, 0},
		{"a 4xx the user falls back on", []routing.Attempt{{Target: plain, Reason: "http_422", Status: 422}}, true, 0},
		{"a 408 may pass", []routing.Attempt{{Target: plain, Reason: "http_408", Status: 408}}, false, 0},
		{"a 5xx: the client's own backoff", []routing.Attempt{
			{Target: broken, Reason: because.Misconfig},
			{Target: plain, Reason: "http_500", Status: 500},
		}, false, 0},
		{"busy: the nearest wait", []routing.Attempt{
			{Target: broken, Reason: because.RedLine},
			{Target: plain, Reason: "http_429", Status: 429, Wait: 3 * time.Second},
		}, false, time.Second},
		{"the upstream's own wait", []routing.Attempt{
			{Target: broken, Reason: because.Misconfig},
			{Target: plain, Reason: "http_429", Status: 429, Wait: 3 * time.Second},
		}, false, 3 * time.Second},
		{"an open breaker", []routing.Attempt{
			{Target: broken, Reason: because.BreakerOpen},
			{Target: plain, Reason: "http_503", Status: 503, Wait: 20 * time.Second},
		}, false, 7500 * time.Millisecond},
		{"every endpoint held by its Retry-After", []routing.Attempt{
			{Target: limited, Reason: because.RateLimited},
			{Target: broken, Reason: because.Misconfig},
		}, false, 12 * time.Second},
		{"busy and a connection failure", []routing.Attempt{
			{Target: broken, Reason: because.RedLine},
			{Target: plain, Reason: because.ConnRefused},
		}, false, 0},
	} {
		never, after := retryAdvice(tc.attempts, t0)
		if never != tc.never || after != tc.after {
			t.Errorf("%s: never %v after %v, want %v %v", tc.name, never, after, tc.never, tc.after)
		}
	}
}
