// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// meter records a finished request's metrics.
func meter(f *Front, x *exchange) {
	gw, al, status, outcome := f.Name, x.alias, x.ans.status, x.ans.outcome
	group := ""
	if x.ans.target != nil {
		group = x.ans.target.Group
	}
	model, client := "", x.clientName()
	var tm *routing.TargetMetrics
	if x.ans.target != nil {
		model, tm = x.ans.target.Model, x.ans.target.MetricsOf(gw, al.Name, client)
	}
	code := routing.CodeClass(status)
	if tm != nil && outcome == routing.OutcomeOK && code == "2xx" && x.color == nil {
		tm.OK.Inc()
	} else {
		color := ""
		if x.color != nil {
			color = x.color.Tag
		}
		routing.RequestsTotal.WithLabelValues(gw, al.Name, group, model, outcome, code, client, color).Inc()
	}
	for _, a := range x.attempts {
		if a.Returned || a.Reason == because.ProtocolUnsupported || a.Reason == because.Sheddable {
			// counted as its try back ended; or a target of another API,
			// which no request of this one falls back from; or a cloud
			// a sheddable client's requests never go to
			continue
		}
		if routing.IsOverflowReason(a.Reason) {
			routing.OverflowsTotal.WithLabelValues(gw, al.Name, a.Target.Group, group, string(a.Reason)).Inc()
		} else {
			routing.FallbacksTotal.WithLabelValues(gw, al.Name, a.Target.Group, group, string(a.Reason)).Inc()
		}
	}
	if group == "" {
		if t, _ := x.charged(); t != nil && x.usage.Found {
			// left by its client before the answer: charged there
			tm := t.MetricsOf(gw, al.Name, client)
			tm.Prompt.Add(float64(x.usage.Prompt))
			tm.Completion.Add(float64(x.usage.Completion))
		}
		return
	}
	if tm == nil {
		tm = routing.NewTargetMetrics(gw, al.Name, x.ans.target, client)
	}
	if x.usage.Found {
		// counts only: the reader refused anything else
		tm.Prompt.Add(float64(x.usage.Prompt))
		tm.Completion.Add(float64(x.usage.Completion))
		meterClasses(gw, al.Name, group, client, &x.usage.Usage)
	}
	if x.usage.Bad && f.BadUsage.Allow(f.Clock.Now()) {
		f.Logger.Warn("ignored usage values that are not token counts (negative, fractional, over 1e9 or not numbers); at most one such warning a minute",
			zap.String("request_id", x.id), x.clientIDField(), zap.String("group", group), zap.String("model", model))
	}
	tm.Duration.Observe(time.Since(x.start).Seconds())
	if x.ans.ttfb > 0 {
		tm.TTFT.Observe(x.ans.ttfb.Seconds())
	}
}

// meterClasses counts the classes within an answer's prompt and
// completion (cached, written to the cache, reasoning) that it has: a
// series of each only where an upstream tells them.
func meterClasses(gw, alias, group, client string, u *protocol.Usage) {
	for _, c := range [...]struct {
		kind string
		n    int64
	}{{routing.KindPromptCached, u.Cached}, {routing.KindPromptCacheWrite, u.CacheWrite}, {routing.KindCompletionReasoning, u.Reasoning}} {
		if c.n > 0 {
			routing.TokensTotal.WithLabelValues(gw, alias, group, c.kind, client, routing.BillingBusiness).Add(float64(c.n))
		}
	}
}

// tokensOf is an answer's usage by the classes prices tell apart.
func tokensOf(u *protocol.Usage) upstream.Tokens {
	return upstream.Tokens{Prompt: u.Prompt, Cached: u.Cached, CacheWrite: u.CacheWrite, Completion: u.Completion}
}
