// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"sync"
	"time"
)

// Limits hold under concurrency because a request reserves, as it is
// admitted, what it may cost: its prompt (estimated) and the completion
// its max_tokens allows (or the clients' reserve_tokens), against its
// client's tpm; and, before it goes to a priced cloud target, that many
// tokens at the target's prices against its client's budget and the
// gateway's spend cap. A request is admitted while use and the
// reservations of the requests in flight are under the limit, so the
// overshoot is at most one request's reservation; its end settles the
// reservation to what it used (the usage, or the estimate), so the wait
// that follows is what the client really used.

// defaultReserveTokens is what a request without a max_tokens reserves.
const defaultReserveTokens = 1024

// maxReserveDuration bounds the time a request priced per second
// reserves: the gateway's deadline, if shorter.
const maxReserveDuration = time.Minute

// tokenBound is the most tokens a request may use: its prompt's estimate
// and the completion its max_tokens allows for each of its choices.
func (rt *route) tokenBound() (prompt, completion int64) {
	f := &rt.features
	prompt = rt.promptEstimate()
	if embeddingsPath(rt.r.URL.Path) {
		return prompt, 0
	}
	per := int64(f.requested())
	if per <= 0 {
		per = defaultReserveTokens
		if n := rt.g.Clients; n != nil && n.ReserveTokens > 0 {
			per = int64(n.ReserveTokens)
		}
	}
	return prompt, per * int64(f.choices())
}

// reserve takes a request into its client's limits: one request of its
// rpm and, with a tpm, the tokens it may use. It reports how long to
// wait, and the limit, when the client is over one.
func (rt *route) reserve(t time.Time) (wait time.Duration, limit string) {
	c := rt.client
	if c == nil || c.usage == nil {
		return 0, ""
	}
	rpm, tpm := c.limits()
	var units int64
	if tpm > 0 {
		p, k := rt.tokenBound()
		units = p + k
	}
	// tokens first: a request refused for tokens takes no request slot
	if w := c.usage.tokens.reserve(tpm, units, t); w > 0 {
		return w, "tokens"
	}
	if w := c.usage.requests.take(rpm, t); w > 0 {
		c.usage.tokens.charge(tpm, -units, t)
		return w, "requests"
	}
	rt.reservedTokens, rt.reservedTPM = units, tpm
	return 0, ""
}

// settleTokens charges the request's client what it used, less what its
// admission reserved.
func (rt *route) settleTokens(t time.Time) {
	used := int64(0)
	if rt.usage.found {
		used = rt.usage.prompt + rt.usage.completion
	}
	c := rt.client
	if c == nil || c.usage == nil {
		return
	}
	// given back at the pace it was taken (a fleet's share may have
	// changed since), then charged at today's
	c.usage.tokens.charge(rt.reservedTPM, -rt.reservedTokens, t)
	_, tpm := c.limits()
	c.usage.tokens.charge(tpm, used, t)
	rt.reservedTokens = 0
}

// spendHolds are the USD that requests in flight on priced cloud targets
// reserved, in all and by client; a book's, so that they outlive a
// reload with the requests.
type spendHolds struct {
	mu      sync.Mutex
	total   float64
	clients map[string]float64
}

// holdCloud reserves what the request may cost on a priced cloud target,
// when a budget or the spend cap bounds it; it returns why the target is
// closed to the request otherwise. A request holds once, topped up to the
// dearest target it tries.
func (rt *route) holdCloud(t *Target) reason {
	g, cc := rt.g, t.group.Cost
	if g.spend == nil || cc == nil {
		return ""
	}
	capped := g.CloudSpend != nil && g.CloudSpend.DailyUSD > 0
	cl := rt.client
	budgeted := cl != nil && cl.known && (cl.budgetDay > 0 || cl.budgetMonth > 0)
	if !capped && !budgeted {
		return ""
	}
	p, k := rt.tokenBound()
	dur := maxReserveDuration
	if g.Deadline > 0 {
		dur = min(dur, time.Duration(g.Deadline))
	}
	need := cc.requestCost(p, k, 0, dur)
	if need <= rt.reservedUSD {
		return ""
	}
	name := ""
	if budgeted {
		name = cl.name
	}
	h := &g.spend.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	total, s := g.spend.spent(name, g.clock.Now())
	// what the others hold: this request's own hold so far is not in its way
	others, mine := h.total-rt.reservedUSD, h.clients[name]-rt.reservedUSD
	switch {
	case capped && total.DayUSD+others >= g.CloudSpend.DailyUSD:
		return reasonSpendCapHeld
	case budgeted && cl.budgetMonth > 0 && s.MonthUSD+mine >= cl.budgetMonth,
		budgeted && cl.budgetDay > 0 && s.DayUSD+mine >= cl.budgetDay:
		return reasonBudgetHeld
	}
	extra := need - rt.reservedUSD
	h.total += extra
	if name != "" {
		if h.clients == nil {
			h.clients = map[string]float64{}
		}
		h.clients[name] += extra
	}
	rt.reservedUSD = need
	return ""
}

// releaseCloud gives back the request's hold, once its spend is booked.
func (rt *route) releaseCloud() {
	if rt.reservedUSD == 0 {
		return
	}
	h := &rt.g.spend.holds
	h.mu.Lock()
	h.total = max(0, h.total-rt.reservedUSD)
	if cl := rt.client; cl != nil && h.clients != nil {
		if v := h.clients[cl.name] - rt.reservedUSD; v > 1e-12 {
			h.clients[cl.name] = v
		} else {
			delete(h.clients, cl.name)
		}
	}
	h.mu.Unlock()
	rt.reservedUSD = 0
}
