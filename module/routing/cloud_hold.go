// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// cloudHold is what one request holds of the cloud spend.
type cloudHold struct {
	USD    float64 // what it may cost on the dearest target it tried
	client string  // the client it counts against ("": none, the spend cap only)
	topUp  float64 // what the last hold added
}

// SpendLimits are what bounds a request's cloud spend: the book's spend
// and holds, the gateway's spend cap, and its deadline, which bounds a
// price per second.
type SpendLimits struct {
	book     *books.SpendBook
	dailyCap float64 // USD; 0: none
	deadline time.Duration
	clock    clock.Clock
}

// cloudClosedGate passes over a cloud target the request may not go to
// for spend: its client's budget or the spend cap is spent (Passage.NoCloud), or,
// on a priced target, the holds in flight leave no room for what the
// request may cost there. It takes nothing: cloudHoldGate does, as the
// attempt starts.
type cloudClosedGate struct{ *SpendLimits }

func (c cloudClosedGate) Judge(p *Passage, t *Target) Reason {
	if p.NoCloud != "" {
		return p.NoCloud
	}
	q, h := c.locked(p, t)
	if h == nil {
		return ""
	}
	defer h.Unlock()
	return c.heldOut(p, q)
}

func (c cloudClosedGate) Admit(p *Passage, t *Target) Reason { return c.Judge(p, t) }
func (cloudClosedGate) Release(*Passage, *Target)            {}

// cloudHoldGate reserves, as the request's attempt on a priced cloud
// target starts, what the request may cost there, when a budget or the
// spend cap bounds it, unless the holds taken since cloudClosedGate
// judged the target close it. A request holds once, topped up to the
// dearest target it tries.
type cloudHoldGate struct{ *SpendLimits }

// Judge is cloudClosedGate's: the hold is taken only at the turn.
func (cloudHoldGate) Judge(*Passage, *Target) Reason { return "" }

func (c cloudHoldGate) Admit(p *Passage, t *Target) Reason {
	q, h := c.locked(p, t)
	if h == nil {
		return ""
	}
	defer h.Unlock()
	if why := c.heldOut(p, q); why != "" {
		return why
	}
	extra := q.need - p.Hold.USD
	h.TakeLocked(q.name, extra)
	p.Hold = cloudHold{USD: q.need, client: q.name, topUp: extra}
	return ""
}

func (c cloudHoldGate) Release(p *Passage, _ *Target) {
	if p.Hold.topUp == 0 {
		return
	}
	c.book.Holds().Give(p.Hold.client, p.Hold.topUp)
	p.Hold.USD -= p.Hold.topUp
	p.Hold.topUp = 0
}

// holdQuote is what a request would hold on a priced cloud target.
type holdQuote struct {
	need     float64 // USD: what the request may cost there
	name     string  // the client it is held for; "" when only the cap bounds it
	capped   bool    // the spend cap bounds it
	budgeted bool    // the client's budget bounds it
}

// quote prices the request's hold on target t. It reports false when
// nothing is to be held: no price, no bound, or the hold already taken
// covers it.
func (s *SpendLimits) quote(p *Passage, t *Target) (holdQuote, bool) {
	cc := t.Upstream.Cost
	if cc == nil {
		return holdQuote{}, false
	}
	capped := s.dailyCap > 0
	cl := p.Bounds.Client
	budgeted := cl != nil && cl.Known && (cl.BudgetDay > 0 || cl.BudgetMonth > 0)
	if !capped && !budgeted {
		return holdQuote{}, false
	}
	prompt, completion := p.Bounds.TokenBoundOn(t)
	dur := maxReserveDuration
	if s.deadline > 0 {
		dur = min(dur, s.deadline)
	}
	need := cc.RequestCost(upstream.Tokens{Prompt: prompt, Completion: completion}, dur)
	if need <= p.Hold.USD {
		return holdQuote{}, false
	}
	name := ""
	if budgeted {
		name = cl.Name
	}
	return holdQuote{need: need, name: name, capped: capped, budgeted: budgeted}, true
}

// locked quotes the request's hold on t and, when there is one to
// take, returns the holds locked: the caller unlocks them. Nil: nothing
// to hold.
func (s *SpendLimits) locked(p *Passage, t *Target) (holdQuote, *books.Holds) {
	q, ok := s.quote(p, t)
	if !ok {
		return q, nil
	}
	h := s.book.Holds()
	h.Lock()
	return q, h
}

// heldOut returns why the holds in flight and the spend so far leave no
// room for hold q, if they do. The caller holds the holds' lock.
func (s *SpendLimits) heldOut(p *Passage, q holdQuote) Reason {
	cl, h := p.Bounds.Client, s.book.Holds()
	total, sp := s.book.Spent(q.name, s.clock.Now())
	// what the others hold: this request's own hold so far is not in its way
	others, mine := h.TotalLocked()-p.Hold.USD, h.ClientLocked(q.name)-p.Hold.USD
	switch {
	case q.capped && total.DayUSD+others >= s.dailyCap:
		return because.SpendCapHeld
	case q.budgeted && cl.BudgetMonth > 0 && sp.MonthUSD+mine >= cl.BudgetMonth,
		q.budgeted && cl.BudgetDay > 0 && sp.DayUSD+mine >= cl.BudgetDay:
		return because.BudgetHeld
	}
	return ""
}

// Release gives back a request's hold, once its spend is booked:
// what it took, from the total and from the client it was held for (none
// when only the spend cap bounded it).
func (h *cloudHold) Release(m *money.Money) {
	if h.USD == 0 {
		return
	}
	m.Spend.Holds().Give(h.client, h.USD)
	*h = cloudHold{}
}
