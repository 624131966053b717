// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/http"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
)

// finish settles the request's outcome and records its metrics.
func (rt *route) finish() {
	switch {
	case rt.x.ans.outcome != "":
	case rt.r.Context().Err() != nil && rt.x.ans.target == nil:
		rt.x.ans.outcome = outcomeClientCanceled
	case rt.x.ans.status >= 500:
		rt.x.ans.outcome = outcomeUpstream
	case rt.x.ans.status >= 400:
		rt.x.ans.outcome = outcomeClientError
	default:
		rt.x.ans.outcome = outcomeOK
	}
	if rt.g.money.priced && rt.x.ans.target != nil && rt.x.ans.interruption == "" && rt.r.Context().Err() == nil {
		// a journaled charge outlives a kill; the answer it is for must
		// have left first: until the handler returns, a short one waits
		// in the server's buffer
		_ = http.NewResponseController(rt.w).Flush()
	}
	rt.x.ans.overflow = rt.overflowed(rt.x.ans.target)
	rt.x.estimateUsage(&rt.passage.bounds, rt.g.Name)
	meter(rt.g, &rt.x)
	if c := rt.x.alias.chain; c != nil {
		c.settle(&rt.x, rt.g.clock.Now())
	}
	at := rt.g.clock.Now()
	rt.cost(at)
	rt.passage.hold.release(&rt.g.money) // once its spend is booked: never neither counts
	rt.held.settle(rt.x.client, &rt.x.usage, at)
	traceOutcome(&rt.x)
}

// cost prices the request on the side that served it: a cloud's tokens
// or seconds at its prices, self-hosted tokens at the recent fixed cost
// per token; it goes into the ledger, the cloud spend and the log. at is
// when the answer ended.
func (rt *route) cost(at time.Time) {
	t, began := rt.x.charged()
	if t == nil || rt.g.money.ledger == nil {
		return
	}
	cc := t.group.Cost
	usd, cloudUSD := 0.0, 0.0
	switch {
	case cc == nil:
	case t.group.Kind == KindOpenAI:
		usd = cc.requestCost(rt.x.usage.Prompt, rt.x.usage.Completion, rt.x.usage.Cached, at.Sub(began))
		cloudUSD = usd
		costTotal.WithLabelValues(rt.g.Name, t.Group, rt.x.clientName(), billingBusiness).Add(usd)
	default:
		usd = float64(rt.x.usage.Prompt+rt.x.usage.Completion) * rt.g.money.selfCostPerToken()
	}
	rt.g.money.charge(rt.x.client, journal.Charge{Client: rt.x.clientName(), SelfHosted: t.group.Kind == KindVLLM,
		Prompt: rt.x.usage.Prompt, Completion: rt.x.usage.Completion, CloudUSD: cloudUSD, Estimated: rt.x.ans.estimated}, at)
	rt.x.ans.costUSD, rt.x.ans.priced = usd, cc != nil
}
