// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"slices"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"go.uber.org/zap"
)

// takesNothing is the release of a gate that takes nothing.
type takesNothing struct{}

func (takesNothing) release(*passage, *Target) {}

// outGate passes over a target nothing may go to, whatever the request
// (see takenOut).
type outGate struct {
	takesNothing
	clock clock.Clock
}

func (o outGate) judge(_ *passage, t *Target) reason { return t.takenOut(o.clock) }
func (o outGate) admit(_ *passage, t *Target) reason { return t.takenOut(o.clock) }

// windowGate passes over a target whose context window cannot hold the
// request, or is no larger than one a context-length error proved too
// small.
type windowGate struct{ takesNothing }

func (windowGate) judge(p *passage, t *Target) reason {
	if w := t.contextWindow(); w > 0 {
		if (p.minWindow > 0 && w <= p.minWindow) || p.bounds.q.features.exceeds(w) {
			return because.ContextWindow
		}
	}
	return ""
}

func (w windowGate) admit(p *passage, t *Target) reason { return w.judge(p, t) }

// overflowGate passes over a vLLM target whose group overflows, unless
// the request came back to it (see returnSpilled). At the target's turn
// it drives the group's overflow controller and records the first
// overflow the request leaves; judged ahead, it leaves the controller as
// it is and overflow always applies.
type overflowGate struct {
	takesNothing
	clock  clock.Clock
	logger *zap.Logger
}

func (o overflowGate) judge(_ *passage, t *Target) reason {
	grp := t.group
	t0 := o.clock.Now()
	if grp.Overflow.WouldOverflow(&grp.Shared.Overflow, grp.VLLM.Signals(t0), t0) {
		return because.Overflow
	}
	return ""
}

func (o overflowGate) admit(p *passage, t *Target) reason {
	grp := t.group
	if slices.Contains(p.returned, t) {
		return ""
	}
	t0 := o.clock.Now()
	on, signal := grp.Overflow.Evaluate(&grp.Shared.Overflow, grp.VLLM.Signals(t0), t0, o.logger, grp.Run.Name)
	if !on {
		return ""
	}
	if p.overflow == "" {
		p.overflow = grp.Run.Name + ":" + signal
	}
	return because.Overflow
}

// breakerGate passes over a target whose group's breaker is open. At the
// target's turn a breaker half open lets one request through as its
// trial (passage.trial), which the attempt settles, or release gives
// back.
type breakerGate struct{ clock clock.Clock }

func (b breakerGate) judge(_ *passage, t *Target) reason {
	if !t.group.Shared.Breaker.WouldAllow(b.clock.Now()) {
		return because.BreakerOpen
	}
	return ""
}

func (b breakerGate) admit(p *passage, t *Target) reason {
	ok, trial := t.group.Shared.Breaker.Allow(b.clock.Now())
	if !ok {
		return because.BreakerOpen
	}
	p.trial = trial
	return ""
}

func (breakerGate) release(p *passage, t *Target) {
	if p.trial {
		t.group.Shared.Breaker.ReleaseTrial()
		p.trial = false
	}
}
