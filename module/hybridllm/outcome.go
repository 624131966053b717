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
	group := ""
	if rt.answered != nil {
		group = rt.answered.Group
	}
	switch {
	case rt.outcome != "":
	case rt.r.Context().Err() != nil && rt.answered == nil:
		rt.outcome = outcomeClientCanceled
	case rt.status >= 500:
		rt.outcome = outcomeUpstream
	case rt.status >= 400:
		rt.outcome = outcomeClientError
	default:
		rt.outcome = outcomeOK
	}
	if rt.g.money.priced && rt.answered != nil && rt.interruption == "" && rt.r.Context().Err() == nil {
		// a journaled charge outlives a kill; the answer it is for must
		// have left first: until the handler returns, a short one waits
		// in the server's buffer
		_ = http.NewResponseController(rt.w).Flush()
	}
	rt.estimateUsage()
	rt.meter(rt.alias, group, rt.status, rt.outcome)
	if rt.alias.chain != nil {
		rt.settleChain()
	}
	at := rt.g.clock.Now()
	rt.cost(at)
	rt.releaseCloud() // once its spend is booked: never neither counts
	rt.settleTokens(at)
	rt.traceOutcome()
}

// cost prices the request on the side that served it: a cloud's tokens
// or seconds at its prices, self-hosted tokens at the recent fixed cost
// per token; it goes into the ledger, the cloud spend and the log. at is
// when the answer ended.
func (rt *route) cost(at time.Time) {
	t, began := rt.charged()
	if t == nil || rt.g.money.ledger == nil {
		return
	}
	cc := t.group.Cost
	usd, cloudUSD := 0.0, 0.0
	switch {
	case cc == nil:
	case t.group.Kind == KindOpenAI:
		usd = cc.requestCost(rt.usage.Prompt, rt.usage.Completion, rt.usage.Cached, at.Sub(began))
		cloudUSD = usd
		costTotal.WithLabelValues(rt.g.Name, t.Group, rt.clientName(), billingBusiness).Add(usd)
	default:
		usd = float64(rt.usage.Prompt+rt.usage.Completion) * rt.g.money.selfCostPerToken()
	}
	rt.g.money.charge(rt.client, journal.Charge{Client: rt.clientName(), SelfHosted: t.group.Kind == KindVLLM,
		Prompt: rt.usage.Prompt, Completion: rt.usage.Completion, CloudUSD: cloudUSD, Estimated: rt.estimated}, at)
	rt.costUSD, rt.priced = usd, cc != nil
}
