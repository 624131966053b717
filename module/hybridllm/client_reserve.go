// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"sync"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
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
// and the completion its max_tokens allows for each of its choices, on
// whatever target it goes to.
func (rt *route) tokenBound() (prompt, completion int64) {
	return rt.tokenBoundOn(nil)
}

// tokenBoundOn is tokenBound on target t (nil: any target). Where a
// length field bounds the answer (tokenFields), the client's max_tokens
// ceiling bounds it (see clients.Ceilings.Apply), and on a tier with a
// max_tokens, that (see tierBody): the request is sent clamped to it, or given it when it
// says nothing (but on the legacy completions endpoint).
func (rt *route) tokenBoundOn(t *Target) (prompt, completion int64) {
	f := &rt.features
	prompt = rt.promptEstimate()
	if rt.api.PromptOnly {
		return prompt, 0
	}
	per := int64(f.requested())
	if len(rt.api.LengthFields) > 0 {
		if cl := rt.client; cl != nil && cl.ceilings.MaxTokens > 0 && (per <= 0 || per > int64(cl.ceilings.MaxTokens)) {
			// the ceilings set a missing length field to the ceiling, and leave
			// a field the path does not read (max_completion_tokens on
			// the legacy completions endpoint) as it is: the upstream
			// reads the one it bounds
			per = int64(cl.ceilings.MaxTokens)
		}
		if t != nil && t.Tier != nil && t.Tier.MaxTokens > 0 {
			tier := int64(t.Tier.MaxTokens)
			switch {
			case per > 0:
				per = min(per, tier)
			case !rt.api.ShortByDefault:
				per = tier
			}
		}
	}
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
	w, until := c.usage.tokens.Reserve(tpm, units, t)
	if w > 0 {
		return w, "tokens"
	}
	if w := c.usage.requests.Take(rpm, t); w > 0 {
		c.usage.tokens.GiveBack(tpm, units, until, t)
		return w, "requests"
	}
	rt.reservedTokens, rt.reservedTPM, rt.reservedUntil = units, tpm, until
	return 0, ""
}

// settleTokens charges the request's client what it used, less what its
// admission reserved and is still ahead.
func (rt *route) settleTokens(t time.Time) {
	used := int64(0)
	if rt.usage.Found {
		used = rt.usage.Prompt + rt.usage.Completion
	}
	c := rt.client
	if c == nil || c.usage == nil {
		return
	}
	// given back at the pace it was taken (a fleet's share may have
	// changed since), then charged at today's
	c.usage.tokens.GiveBack(rt.reservedTPM, rt.reservedTokens, rt.reservedUntil, t)
	_, tpm := c.limits()
	c.usage.tokens.Charge(tpm, used, t)
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

// cloudRefusal returns why a priced cloud target is closed to the
// request for the holds in flight, if it is: what hold would refuse,
// without taking anything, so that a target may be judged (by skip, by
// the degradation chain) before it is tried.
func (rt *route) cloudRefusal(t *Target) reason {
	q, ok := rt.holdQuote(t)
	if !ok {
		return ""
	}
	h := &rt.g.spend.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	return rt.heldOut(q)
}

// hold reserves, as the request's attempt on target t starts, what the
// request may cost there, when a budget or the spend cap bounds it; it
// returns why the target is closed to the request otherwise. A request
// holds once, topped up to the dearest target it tries.
func (rt *route) hold(t *Target) reason {
	if t.group.Kind != KindOpenAI {
		return ""
	}
	q, ok := rt.holdQuote(t)
	if !ok {
		return ""
	}
	h := &rt.g.spend.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if why := rt.heldOut(q); why != "" {
		return why
	}
	extra := q.need - rt.reservedUSD
	h.total += extra
	if q.name != "" {
		if h.clients == nil {
			h.clients = map[string]float64{}
		}
		h.clients[q.name] += extra
	}
	rt.reservedUSD, rt.heldFor = q.need, q.name
	return ""
}

// holdQuote is what a request would hold on a priced cloud target.
type holdQuote struct {
	need     float64 // USD: what the request may cost there
	name     string  // the client it is held for; "" when only the cap bounds it
	capped   bool    // the spend cap bounds it
	budgeted bool    // the client's budget bounds it
}

// holdQuote prices the request's hold on target t. It reports false when
// nothing is to be held: no spend book or price, no bound, or the hold
// already taken covers it.
func (rt *route) holdQuote(t *Target) (holdQuote, bool) {
	g, cc := rt.g, t.group.Cost
	if g.spend == nil || cc == nil {
		return holdQuote{}, false
	}
	capped := g.CloudSpend != nil && g.CloudSpend.DailyUSD > 0
	cl := rt.client
	budgeted := cl != nil && cl.known && (cl.budgetDay > 0 || cl.budgetMonth > 0)
	if !capped && !budgeted {
		return holdQuote{}, false
	}
	p, k := rt.tokenBoundOn(t)
	dur := maxReserveDuration
	if g.Deadline > 0 {
		dur = min(dur, time.Duration(g.Deadline))
	}
	need := cc.requestCost(p, k, 0, dur)
	if need <= rt.reservedUSD {
		return holdQuote{}, false
	}
	name := ""
	if budgeted {
		name = cl.name
	}
	return holdQuote{need: need, name: name, capped: capped, budgeted: budgeted}, true
}

// heldOut returns why the holds in flight and the spend so far leave no
// room for hold q, if they do. The caller holds the holds' lock.
func (rt *route) heldOut(q holdQuote) reason {
	g, cl, h := rt.g, rt.client, &rt.g.spend.holds
	total, s := g.spend.spent(q.name, g.clock.Now())
	// what the others hold: this request's own hold so far is not in its way
	others, mine := h.total-rt.reservedUSD, h.clients[q.name]-rt.reservedUSD
	switch {
	case q.capped && total.DayUSD+others >= g.CloudSpend.DailyUSD:
		return because.SpendCapHeld
	case q.budgeted && cl.budgetMonth > 0 && s.MonthUSD+mine >= cl.budgetMonth,
		q.budgeted && cl.budgetDay > 0 && s.DayUSD+mine >= cl.budgetDay:
		return because.BudgetHeld
	}
	return ""
}

// releaseCloud gives back the request's hold, once its spend is booked:
// what it took, from the total and from the client it was held for (none
// when only the spend cap bounded it).
func (rt *route) releaseCloud() {
	if rt.reservedUSD == 0 {
		return
	}
	h := &rt.g.spend.holds
	h.mu.Lock()
	h.total = max(0, h.total-rt.reservedUSD)
	if name := rt.heldFor; name != "" && h.clients != nil {
		if v := h.clients[name] - rt.reservedUSD; v > 1e-12 {
			h.clients[name] = v
		} else {
			delete(h.clients, name)
		}
	}
	h.mu.Unlock()
	rt.reservedUSD, rt.heldFor = 0, ""
}
