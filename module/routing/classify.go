// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"
	"fmt"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
)

// Reason says why a target was left or passed over (see because).
type Reason = because.Reason

// statusSet is a set of upstream statuses from 400 to 599.
type statusSet [4]uint64

// has reports whether status is in the set.
func (s *statusSet) has(status int) bool {
	i := status - 400
	return i >= 0 && i < 200 && s[i>>6]&(1<<(i&63)) != 0
}

func (s *statusSet) add(status int) { i := status - 400; s[i>>6] |= 1 << (i & 63) }

// defaultFallbackOn is the statuses that move a request to the next
// target unless the target sets fallback_on: 408, 429 and every 5xx (the
// upstream is slow, busy or broken) and 401, 403 (the gateway's own
// credentials are wrong for this upstream). A 404 that says the model
// does not exist falls back whatever the set (see the core's attempt writer); any
// other 404 goes to the client unless the set has 404.
var defaultFallbackOn = []int{401, 403, 408, 429, 5}

// newStatusSet builds the set of fallback_on values: statuses from 400 to
// 599, and 4 or 5 for a whole class, as in Caddy's status matchers.
func newStatusSet(codes []int) (statusSet, error) {
	var s statusSet
	for _, c := range codes {
		switch {
		case c == 4 || c == 5:
			for st := c * 100; st < c*100+100; st++ {
				s.add(st)
			}
		case c >= 400 && c <= 599:
			s.add(c)
		default:
			return s, fmt.Errorf("fallback_on: %d is not a 4xx or 5xx status", c)
		}
	}
	return s, nil
}

// Verdict is what an attempt says about its upstream, for the breakers.
type Verdict = breaker.Outcome

// Verdicts of an attempt.
const (
	VerdictNone    = breaker.None // no evidence either way (client left, skipped)
	VerdictSuccess = breaker.Success
	VerdictFailure = breaker.Failure
)

// VerdictOf judges an attempt that failed without an answer, for why,
// for the breakers: an upstream failure is a failure, and anything the
// upstream cannot be blamed for (the client left, say) is neither. (An
// answer is a success: a 4xx is the client's business.)
func VerdictOf(why Reason, client context.Context) Verdict {
	if client.Err() != nil {
		return VerdictNone
	}
	switch why {
	case because.Deadline, because.ContextLength, because.NoEndpoint, because.RedLine, because.ClassReserve, because.Sheddable, because.Unhealthy,
		because.Misconfig, because.StaleMetrics, because.BreakerOpen, because.Degraded, because.Overflow, because.ContextWindow, because.Drained,
		because.SLOBreach, because.KVPressure, because.Format, because.DegradeCap,
		because.Avoided, because.RateLimited, because.NotFound, because.Budget, because.SpendCap, because.BudgetHeld, because.SpendCapHeld, because.SpendUnknown,
		because.ProtocolUnsupported, because.PreviousResponseMissing:
		// a 404 that does not name the model may be the path the client
		// chose: no evidence against the upstream
		return VerdictNone
	}
	return VerdictFailure
}
