// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
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
