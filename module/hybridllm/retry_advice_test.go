// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

func TestRetryAdvice(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plain := &Target{Group: "cloud", group: &Group{Shared: &upstream.GroupState{}}}
	broken := &Target{Group: "self", group: &Group{Shared: &upstream.GroupState{}, Breaker: &BreakerConfig{AllowedFails: 1, Cooldown: 0}}}
	broken.group.Shared.Breaker.Failure(broken.group.Breaker, t0.Add(-22500*time.Millisecond), breaker.Cause{}) // open until t0+7.5s
	held := &upstream.Endpoint{Breaker: new(breaker.Breaker)}
	held.Breaker.Hold(t0.Add(12 * time.Second)) // a 429's Retry-After
	limited := &Target{Group: "self", group: &Group{Shared: &upstream.GroupState{},
		VLLM: &upstream.VLLMGroup{Endpoints: map[string]*upstream.Endpoint{"a": held, "b": {Breaker: new(breaker.Breaker)}}}}}

	for _, tc := range []struct {
		name     string
		attempts []attempt
		never    bool
		after    time.Duration
	}{
		{"none", nil, false, 0},
		{"every target misconfigured or refusing the key", []attempt{
			{target: broken, reason: because.Misconfig},
			{target: plain, reason: because.UpstreamAuth, status: 401},
		}, true, 0},
		{"too large everywhere", []attempt{
			{target: broken, reason: because.ContextLength, status: 400},
			{target: plain, reason: because.ContextWindow},
		}, true, 0},
		{"a 4xx the user falls back on", []attempt{{target: plain, reason: "http_422", status: 422}}, true, 0},
		{"a 408 may pass", []attempt{{target: plain, reason: "http_408", status: 408}}, false, 0},
		{"a 5xx: the client's own backoff", []attempt{
			{target: broken, reason: because.Misconfig},
			{target: plain, reason: "http_500", status: 500},
		}, false, 0},
		{"busy: the nearest wait", []attempt{
			{target: broken, reason: because.RedLine},
			{target: plain, reason: "http_429", status: 429, wait: 3 * time.Second},
		}, false, time.Second},
		{"the upstream's own wait", []attempt{
			{target: broken, reason: because.Misconfig},
			{target: plain, reason: "http_429", status: 429, wait: 3 * time.Second},
		}, false, 3 * time.Second},
		{"an open breaker", []attempt{
			{target: broken, reason: because.BreakerOpen},
			{target: plain, reason: "http_503", status: 503, wait: 20 * time.Second},
		}, false, 7500 * time.Millisecond},
		{"every endpoint held by its Retry-After", []attempt{
			{target: limited, reason: because.RateLimited},
			{target: broken, reason: because.Misconfig},
		}, false, 12 * time.Second},
		{"busy and a connection failure", []attempt{
			{target: broken, reason: because.RedLine},
			{target: plain, reason: because.ConnRefused},
		}, false, 0},
	} {
		never, after := retryAdvice(tc.attempts, t0)
		if never != tc.never || after != tc.after {
			t.Errorf("%s: never %v after %v, want %v %v", tc.name, never, after, tc.never, tc.after)
		}
	}
}
