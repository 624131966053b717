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

// waitInQueue holds a sheddable request that found its self-hosted
// targets full in the queue of the first such group with classes, and
// takes it past its plan again each time a slot of the group is given
// back, until it is answered (done) or its wait is over. A full queue, a
// group that failed rather than was full, or none with classes: it does
// not wait.
func (rt *Route) waitInQueue(ctx context.Context, plan []*routing.Target) (done bool, err error) {
	sh := queueOf(rt.x.attempts)
	if sh == nil || rt.r.Context().Err() != nil {
		return false, nil
	}
	tk := sh.Queue.Enter()
	if tk == nil {
		return false, nil // as many wait already as the group keeps: 429 now
	}
	defer tk.Leave()
	rt.x.ans.via.queued = true
	wait := time.NewTimer(sh.Wait)
	defer wait.Stop()
	first := len(rt.x.attempts) // the first pass's, kept: why it waited
	for {
		// a slot given back from here on wakes it
		tk.Arm()
		rt.x.attempts = rt.x.attempts[:first]
		if done, err := rt.pass(ctx, plan); done || ctx.Err() != nil {
			return done, err
		}
		if !tk.Wait(ctx, wait.C) {
			return false, nil
		}
	}
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
