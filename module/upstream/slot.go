// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"net/http"

	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"go.uber.org/zap"
)

// slotWriter is the response writer of a request the gateway sends
// through a vLLM group's proxy: an attempt, a mirror's copy, a drill. The
// proxy hands the selection policy the writer it was given, so the writer
// carries the request's slot to the policy.
type slotWriter interface {
	// HeldSlot returns the slot, if any; its group is nil where the
	// request's group is not vLLM's
	HeldSlot() *Slot
}

// SlotOf returns the attempt slot the proxy's writer w carries, if any.
func SlotOf(w http.ResponseWriter) *Slot {
	if sw, ok := w.(slotWriter); ok {
		return sw.HeldSlot()
	}
	return nil
}

// Slot is one attempt's link between the gateway and the policy.
type Slot struct {
	Group    *VLLMGroup
	Model    string
	Avoid    []*Endpoint   // endpoints that failed this request already
	Endpoint *Endpoint     // the endpoint picked last, for the breaker's verdict
	held     *probe.Prober // whose in-flight slot this attempt holds
	Skip     reason        // why no endpoint was eligible
	// endpoints that failed within this attempt (the proxy's own retries)
	Failed int
	// a drill's endpoint: the only one the policy may pick
	Pin string
	// the conversation's key, for a group with affinity (0: none; see
	// AffinityConfig)
	Affinity uint64
	Trial    bool // the attempt is its endpoint breaker's half-open trial
	// a mirror's copy: it goes only to an endpoint with room to spare
	// whose breaker is closed
	Shadow bool
	// a drill: it goes to drained endpoints and through open breakers
	Drill bool
	// the endpoint picked was the conversation's rather than the least
	// loaded
	ByAffinity bool
	// the request's priority class, for a group with classes
	Class priority.Class
}

// Release gives back the in-flight slot the attempt holds, if any.
func (s *Slot) Release() {
	if s.held != nil {
		s.held.Inflight.Add(-1)
		s.held = nil
		if c := s.Group.Settings.classes; c != nil {
			c.Queue.Wake() // a sheddable request waiting may take it
		}
	}
}

// pickFailed notes that the endpoint picked last failed before any
// answer (the proxy retries only such a pick, lb_retries) and settles its
// breaker, its half-open trial included; a drill's verdict is never
// recorded.
func (s *Slot) pickFailed(logger *zap.Logger) {
	prev := s.Endpoint
	if prev == nil || s.Group.Settings.breaker == nil || s.Drill {
		return
	}
	v := breaker.Verdict{Outcome: breaker.Failure, Trial: s.Trial, Cause: breaker.Cause{Conn: true, Probe: prev.Prober.HealthSeq()}}
	if prev.Breaker.Settle(s.Group.Settings.breaker, v, s.Group.clock.Now()) != breaker.Kept && logger != nil {
		logger.Warn("breaker open", zap.String("group", s.Group.Name), zap.String("endpoint", prev.Dial))
	}
	s.Endpoint, s.Trial = nil, false
	s.Failed++
}
