// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"slices"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// takesNothing is the release of a gate that takes nothing.
type takesNothing struct{}

func (takesNothing) Release(*Passage, *Target) {}

// outGate passes over a target nothing may go to, whatever the request
// (see Target.TakenOut).
type outGate struct {
	takesNothing
	clock clock.Clock
}

func (o outGate) Judge(_ *Passage, t *Target) Reason { return t.TakenOut(o.clock) }
func (o outGate) Admit(_ *Passage, t *Target) Reason { return t.TakenOut(o.clock) }

// apiGate passes over a target whose group does not serve the request's
// API, nor takes it translated (see Asked.Translated).
type apiGate struct{ takesNothing }

func (apiGate) Judge(p *Passage, t *Target) Reason {
	if _, ok := p.Bounds.Asked.Translated(t.Upstream); !ok {
		return because.ProtocolUnsupported
	}
	return ""
}

func (a apiGate) Admit(p *Passage, t *Target) Reason { return a.Judge(p, t) }

// windowGate passes over a target whose context window cannot hold the
// request, or is no larger than one a context-length error proved too
// small.
type windowGate struct{ takesNothing }

func (windowGate) Judge(p *Passage, t *Target) Reason {
	if p.Bounds.Asked.API.Free {
		return "" // a token count is how a client learns it is over
	}
	if w := t.Window(); w > 0 {
		if (p.MinWindow > 0 && w <= p.MinWindow) || p.Bounds.Asked.Features.exceeds(w) {
			return because.ContextWindow
		}
	}
	return ""
}

func (w windowGate) Admit(p *Passage, t *Target) Reason { return w.Judge(p, t) }

// overflowGate passes over a vLLM target whose group overflows, unless
// the request came back to it (see the core's returnSpilled). At the
// target's turn it drives the group's overflow controller and records
// the first overflow the request leaves; judged ahead, it leaves the
// controller as it is and overflow always applies.
type overflowGate struct {
	takesNothing
	clock  clock.Clock
	logger *zap.Logger
}

func (o overflowGate) Judge(p *Passage, t *Target) Reason {
	grp := t.Upstream
	if stays(p, grp.VLLM) {
		return ""
	}
	t0 := o.clock.Now()
	if grp.Overflow.WouldOverflow(&grp.Shared.Overflow, grp.VLLM.Signals(t0), t0) {
		return because.Overflow
	}
	return ""
}

func (o overflowGate) Admit(p *Passage, t *Target) Reason {
	grp := t.Upstream
	if slices.Contains(p.Returned, t) {
		return ""
	}
	t0 := o.clock.Now()
	on, signal := grp.Overflow.Evaluate(&grp.Shared.Overflow, grp.VLLM.Signals(t0), t0, o.logger, grp.Run.Name)
	if !on || stays(p, grp.VLLM) {
		return ""
	}
	if p.Overflow == "" {
		p.Overflow = grp.Run.Name + ":" + signal
	}
	return because.Overflow
}

// stays reports whether a request stays on an overflowing vLLM group:
// an interactive one, where the group has classes (up to the red line).
func stays(p *Passage, vg *upstream.VLLMGroup) bool {
	return p.Class == priority.Interactive && vg.Classes() != nil
}

// shedGate passes over a cloud target for a sheddable request, which
// waits for a self-hosted slot instead (see the core's queue).
type shedGate struct{ takesNothing }

func (shedGate) Judge(p *Passage, _ *Target) Reason {
	if p.Sheddable {
		return because.Sheddable
	}
	return ""
}

func (s shedGate) Admit(p *Passage, t *Target) Reason { return s.Judge(p, t) }

// breakerGate passes over a target whose group's breaker is open. At the
// target's turn a breaker half open lets one request through as its
// trial (Passage.Trial), which the attempt settles, or release gives
// back.
type breakerGate struct{ clock clock.Clock }

func (b breakerGate) Judge(_ *Passage, t *Target) Reason {
	if !t.Upstream.Shared.Breaker.WouldAllow(b.clock.Now()) {
		return because.BreakerOpen
	}
	return ""
}

func (b breakerGate) Admit(p *Passage, t *Target) Reason {
	ok, trial := t.Upstream.Shared.Breaker.Allow(b.clock.Now())
	if !ok {
		return because.BreakerOpen
	}
	p.Trial = trial
	return ""
}

func (breakerGate) Release(p *Passage, t *Target) {
	if p.Trial {
		t.Upstream.Shared.Breaker.ReleaseTrial()
		p.Trial = false
	}
}
