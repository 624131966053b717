// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// varAttempt is the request variable through which the gateway tells the
// selection policy which group and model an attempt is for: a
// *slotHolder.
const varAttempt = "hybrid_llm.attempt"

// slotHolder holds the current attempt's slot. The request's variables
// are set once: the proxy's transport may still read them from the dial
// of an earlier attempt (net/http dials on a goroutine of its own), so
// each attempt changes the holder, not the map.
type slotHolder struct{ p atomic.Pointer[attemptSlot] }

// holdSlot puts slot in the holder, the first time also in the request's
// variables.
func holdSlot(ctx context.Context, h *slotHolder, slot *attemptSlot) {
	if h.p.Load() == nil && caddyhttp.GetVar(ctx, varAttempt) == nil {
		caddyhttp.SetVar(ctx, varAttempt, h)
	}
	h.p.Store(slot)
}

// slotOf returns the attempt slot of a request, if any.
func slotOf(r *http.Request) *attemptSlot {
	if h, ok := caddyhttp.GetVar(r.Context(), varAttempt).(*slotHolder); ok {
		return h.p.Load()
	}
	return nil
}

// attemptSlot is one attempt's link between the gateway and the policy.
type attemptSlot struct {
	group *vllmGroup
	model string
	avoid []*endpoint // endpoints that failed this request already
	ep    *endpoint   // the endpoint picked last, for the breaker's verdict
	held  *prober     // whose in-flight slot this attempt holds
	trial bool        // the attempt is its endpoint breaker's half-open trial
	skip  reason      // why no endpoint was eligible
	// endpoints that failed within this attempt (the proxy's own retries)
	failed int
	// a mirror's copy: it goes only to an endpoint with room to spare
	shadow bool
}

// release gives back the in-flight slot the attempt holds, if any.
func (s *attemptSlot) release() {
	if s.held != nil {
		s.held.inflight.Add(-1)
		s.held = nil
	}
}
