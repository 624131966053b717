// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// waitInQueue holds a sheddable request in a group's queue (sh: the
// group's classes; nil: none to wait in), and takes it past its plan
// again each time a slot of the group is given back, until it is
// answered (done), a pass fails rather than finds the group full, or its
// wait is over. tried: the request has just been past its plan (else it
// waits first, behind those ahead of it). A full queue: it does not
// wait.
func (rt *Route) waitInQueue(ctx context.Context, plan []*routing.Target, sh *priority.Shares, tried bool) (done bool, err error) {
	if sh == nil || rt.r.Context().Err() != nil {
		return false, nil
	}
	tk := sh.Queue.Enter()
	if tk == nil {
		// as many wait already as the group keeps: what the targets say
		// now is its answer (a 429 when they are full)
		if !tried {
			return rt.passAgain(ctx, plan)
		}
		return false, nil
	}
	defer tk.Leave()
	wait := time.NewTimer(sh.Wait)
	defer wait.Stop()
	woken := false
	for {
		// a slot given back from here on wakes it
		tk.Arm()
		if tried || woken {
			if done, err := rt.passAgain(ctx, plan); done || !onlyFull(rt.x.attempts) {
				return done, err // answered, or failed rather than found full
			}
			if woken {
				tk.PassOn() // the slot freed was not one its class may take
			}
		}
		tried = true
		select {
		case <-wait.C:
			return false, nil // its wait is over
		default:
		}
		if woken = tk.Wait(ctx, wait.C); !woken {
			if len(rt.x.attempts) == 0 && ctx.Err() == nil {
				// it waited behind others from the start: what the
				// targets say now is its answer
				return rt.passAgain(ctx, plan)
			}
			return false, nil
		}
		rt.x.ans.via.queued = true
	}
}

// passAgain takes the request past its plan once more, its records
// replacing those of the pass before (which found every target full).
func (rt *Route) passAgain(ctx context.Context, plan []*routing.Target) (done bool, err error) {
	rt.x.attempts = rt.x.attempts[:0]
	rt.passage.Again()
	return rt.pass(ctx, plan)
}

// onlyFull reports whether a pass passed every target over as full (at
// its red line, its class's share, overflowing, held for a 429) or closed
// to a sheddable request: no upstream was asked, and none failed.
func onlyFull(attempts []routing.Attempt) bool {
	for i := range attempts {
		if a := &attempts[i]; !atCapacity(a) || a.Status != 0 {
			return false
		}
	}
	return len(attempts) > 0
}

// queueAhead is, for a sheddable request, the classes of the first vLLM
// group of its plan that others wait for already; nil if none.
func queueAhead(sheddable bool, plan []*routing.Target) *priority.Shares {
	if !sheddable {
		return nil
	}
	for _, t := range plan {
		if vg := t.Upstream.VLLM; vg != nil && vg.Classes() != nil && vg.Classes().Queue.Len() > 0 {
			return vg.Classes()
		}
	}
	return nil
}

// queueOf is the classes of the first vLLM group the request found full
// (at its red line, its class's share of it, or overflowing), if it has
// them.
func queueOf(attempts []routing.Attempt) *priority.Shares {
	for i := range attempts {
		a := &attempts[i]
		switch a.Reason {
		case because.RedLine, because.ClassReserve, because.Overflow:
		default:
			continue
		}
		if vg := a.Target.Upstream.VLLM; vg != nil && vg.Classes() != nil {
			return vg.Classes()
		}
	}
	return nil
}
