// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
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

// DefaultReserveTokens is what a request without a max_tokens reserves.
const DefaultReserveTokens = 1024

// maxReserveDuration bounds the time a request priced per second
// reserves: the gateway's deadline, if shorter.
const maxReserveDuration = time.Minute

// Reservation is what a request's admission reserved of its client's
// tpm, until its end settles it.
type Reservation struct {
	tokens int64
	tpm    int       // the tpm it was reserved at
	until  time.Time // when it is paid off (see ratelimit.Minute.GiveBack)
}

// TokenBounds bound the tokens a request may use on a target: what it
// asks, its client's ceilings and the clients' reserve_tokens.
type TokenBounds struct {
	Asked   *Asked
	Client  *clients.Caller
	Reserve int64 // a choice's completion when nothing else bounds it (0: DefaultReserveTokens)
}

// TokenBound is the most tokens a request may use: its prompt's estimate
// and the completion its max_tokens allows for each of its choices, on
// whatever target it goes to.
func (b *TokenBounds) TokenBound() (prompt, completion int64) {
	return b.TokenBoundOn(nil)
}

// TokenBoundOn is TokenBound on target t (nil: any target); nothing for
// an API whose answers use no tokens (a token count). Where a
// length field bounds the answer (tokenFields), the client's max_tokens
// ceiling bounds it (see clients.Ceilings.Apply), and on a tier with a
// max_tokens, that (see the core's tierBody): the request is sent clamped to it, or given it when it
// says nothing (but on the legacy completions endpoint).
func (b *TokenBounds) TokenBoundOn(t *Target) (prompt, completion int64) {
	q := b.Asked
	f := &q.Features
	if q.API.Free {
		return 0, 0 // a token count uses no tokens
	}
	prompt = b.PromptEstimate()
	if q.API.PromptOnly {
		return prompt, 0
	}
	per := int64(f.Requested())
	if len(q.API.LengthFields) > 0 {
		if cl := b.Client; cl != nil && cl.Ceilings.MaxTokens > 0 && (per <= 0 || per > int64(cl.Ceilings.MaxTokens)) {
			// the ceilings set a missing length field to the ceiling, and leave
			// a field the path does not read (max_completion_tokens on
			// the legacy completions endpoint) as it is: the upstream
			// reads the one it bounds
			per = int64(cl.Ceilings.MaxTokens)
		}
		if t != nil && t.Tier != nil && t.Tier.MaxTokens > 0 {
			tier := int64(t.Tier.MaxTokens)
			switch {
			case per > 0:
				per = min(per, tier)
			case !q.API.ShortByDefault:
				per = tier
			}
		}
	}
	if per <= 0 {
		per = DefaultReserveTokens
		if b.Reserve > 0 {
			per = b.Reserve
		}
	}
	return prompt, per * int64(f.Choices())
}

// PromptEstimate is the request's prompt in tokens, as estimated: the
// bytes of the fields it is made of, divided by 4, or of its text (with
// mediaPartTokens for each image, audio clip or file) if that is more.
func (b *TokenBounds) PromptEstimate() int64 {
	return int64(max(b.Asked.Features.PromptWithMedia(), (b.Asked.Top.PromptBytes+3)/4))
}

// Take takes a request into its client's limits: one request of its
// rpm and, with a tpm, the tokens it may use. It reports how long to
// wait, and the limit, when the client is over one.
func (h *Reservation) Take(b *TokenBounds, t time.Time) (wait time.Duration, limit string) {
	c := b.Client
	if c == nil || c.Usage == nil {
		return 0, ""
	}
	rpm, tpm := c.Limits()
	var units int64
	if tpm > 0 {
		p, k := b.TokenBound()
		units = p + k
	}
	// tokens first: a request refused for tokens takes no request slot
	w, until := c.Usage.Tokens.Reserve(tpm, units, t)
	if w > 0 {
		return w, "tokens"
	}
	if w := c.Usage.Requests.Take(rpm, t); w > 0 {
		c.Usage.Tokens.GiveBack(tpm, units, until, t)
		return w, "requests"
	}
	*h = Reservation{tokens: units, tpm: tpm, until: until}
	return 0, ""
}

// Settle charges client c what its request used (u, if found), less what
// its admission reserved and is still ahead.
func (h *Reservation) Settle(c *clients.Caller, u *protocol.UsageScanner, t time.Time) {
	used := int64(0)
	if u.Found {
		used = u.Prompt + u.Completion
	}
	if c == nil || c.Usage == nil {
		return
	}
	// given back at the pace it was taken (a fleet's share may have
	// changed since), then charged at today's
	c.Usage.Tokens.GiveBack(h.tpm, h.tokens, h.until, t)
	_, tpm := c.Limits()
	c.Usage.Tokens.Charge(tpm, used, t)
	h.tokens = 0
}
