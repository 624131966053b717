// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"go.uber.org/zap"
)

// A Gate is one check a target passes before an attempt on it: may this
// target serve this request now, and if not, why. Each target holds the
// gates its config calls for (see TargetKit.GatesOf), in a fixed order,
// and the first refusal is the reason it is passed over; a feature that
// is not configured has no gate. A gate reads the request through the
// passage, never through the request core.
type Gate interface {
	// Judge says why t may not take the request ("" if it may), changing
	// nothing: for a target judged ahead of its turn (see LeavesForTier).
	Judge(p *Passage, t *Target) Reason
	// Admit is Judge at t's turn. It may move shared state (an overflow
	// controller's dwell), record on p what the request leaves, and take
	// what the attempt will hold (a breaker's half-open trial, a cloud
	// hold), which Release gives back if a later gate refuses t.
	Admit(p *Passage, t *Target) Reason
	// Release gives back what Admit took for t.
	Release(p *Passage, t *Target)
}

// Passage is one request on its way past its targets' gates: what they
// read of it, and what they record on it.
type Passage struct {
	// the request's facts, its client and the tokens it may use on a
	// target
	Bounds TokenBounds
	// a context-length error proved the request needs a window larger
	// than this (0: none yet)
	MinWindow int
	// targets left for overflow that the request came back to, every
	// later one having refused it
	Returned []*Target
	NoCloud  Reason // why cloud targets are closed to the request, if they are
	// and for how long
	NoCloudFor time.Duration
	Overflow   string // group:signal of the first overflow skip
	// the breaker let the current target through as its half-open
	// trial, which the attempt settles
	Trial bool
	// the request's priority class, and whether it waits for
	// self-hosted rather than go to a cloud (see priority.Config)
	Class     priority.Class
	Sheddable bool
	Hold      cloudHold // what the request holds of the cloud spend
	// with a degradation chain: the request's degradation, the targets
	// after this one in its plan, and the target a trigger left, to be
	// tried last should every tier fail
	Degradation *DegradeRecord
	Rest        []*Target
	Requeue     *Target
}

// Admit asks t's gates, in order, whether t may take the request now,
// and returns the first refusal; what the gates before it took is given
// back.
func (p *Passage) Admit(t *Target) Reason {
	p.Trial = false
	for i, gt := range t.Run.Gates {
		if why := gt.Admit(p, t); why != "" {
			for j := i - 1; j >= 0; j-- {
				t.Run.Gates[j].Release(p, t)
			}
			return why
		}
	}
	return ""
}

// Again readies the passage for another pass over the same plan (a
// request that waited for a slot): what the pass before recorded of the
// targets it left is forgotten.
func (p *Passage) Again() {
	p.Returned, p.Requeue, p.Overflow = nil, nil, ""
	if p.Degradation != nil {
		p.Degradation.deferred = nil
	}
}

// Judge is Admit without effects, for a target judged ahead of its turn.
func (p *Passage) Judge(t *Target) Reason {
	for _, gt := range t.Run.Gates {
		if why := gt.Judge(p, t); why != "" {
			return why
		}
	}
	return ""
}

// TargetKit is what a target's gates and attempt observers are built
// with: the gateway's clock and logger, the bounds on its cloud spend
// (nil without a spend book), and its ledger.
type TargetKit struct {
	clock  clock.Clock
	logger *zap.Logger
	spend  *SpendLimits
	ledger *books.Ledger
	// a vLLM group has priority classes: sheddable requests may wait
	// for it, and pass over cloud targets
	Classes bool
}

// NewTargetKit is the kit of a gateway's targets: its clock and logger,
// its books (m: the ledger, the spend book and the spend cap) and its
// deadline, the longest a request's cloud hold is kept.
func NewTargetKit(c clock.Clock, logger *zap.Logger, m *money.Money, deadline time.Duration) TargetKit {
	k := TargetKit{clock: c, logger: logger, ledger: m.Ledger}
	if m.Spend != nil {
		k.spend = &SpendLimits{book: m.Spend, deadline: deadline, clock: c}
		if m.Cap != nil {
			k.spend.dailyCap = m.Cap.DailyUSD
		}
	}
	return k
}

// GatesOf is target t's gates, in the order they are asked: the API its
// group serves, taken out (drained, unlisted, a cloud's 429), a cloud
// closed to a sheddable request, a cloud closed by spend, the context window, overflow, the breaker, and the
// cloud hold last, as the attempt starts.
func (k TargetKit) GatesOf(t *Target) []Gate {
	grp := t.Upstream
	cloud := grp.Cloud()
	var gates []Gate
	if !grp.ServesAll() {
		gates = append(gates, apiGate{})
	}
	gates = append(gates, outGate{clock: k.clock})
	if cloud && k.Classes {
		gates = append(gates, shedGate{})
	}
	if cloud && k.spend != nil {
		gates = append(gates, cloudClosedGate{k.spend})
	}
	if t.ContextWindow > 0 || grp.VLLM != nil {
		gates = append(gates, windowGate{})
	}
	if grp.Overflow != nil && grp.VLLM != nil {
		gates = append(gates, overflowGate{clock: k.clock, logger: k.logger})
	}
	if grp.Breaker != nil {
		gates = append(gates, breakerGate{clock: k.clock})
	}
	if cloud && k.spend != nil && grp.Cost != nil {
		gates = append(gates, cloudHoldGate{k.spend})
	}
	return gates
}

// ObserversOf is target t's attempt observers, in the order they begin:
// the ledger's GPU occupancy, health and latency, configuration faults,
// the breakers, and the attempt's span innermost.
func (k TargetKit) ObserversOf(t *Target) []AttemptObserver {
	var obs []AttemptObserver
	if o, ok := OccupancyOf(k.ledger, t); ok {
		obs = append(obs, o)
	}
	if watchesHealth(t) {
		obs = append(obs, healthObserver{clock: k.clock})
	}
	obs = append(obs, faultObserver{logger: k.logger})
	if t.Upstream.Breaker != nil {
		obs = append(obs, breakerObserver{clock: k.clock, logger: k.logger})
	}
	return append(obs, spanObserver{})
}

// ChainGates puts the degradation chain's gate before target t's other
// gates: a tier's, or an upper target's trigger's.
func (k TargetKit) ChainGates(c *DegradeChain, alias string, t *Target, gates []Gate) []Gate {
	switch {
	case t.Tier != nil:
		return append([]Gate{tierGate{chain: c, alias: alias, clock: k.clock, logger: k.logger}}, gates...)
	case t.Trigger != nil:
		return append([]Gate{triggerGate{}}, gates...)
	}
	return gates
}
