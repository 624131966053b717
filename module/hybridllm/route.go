// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"go.opentelemetry.io/otel/trace"
)

// attempt is the record of one try of one target.
type attempt struct {
	target *Target
	reason reason // empty when it answered
	status int    // upstream status, when it answered with a fallback status
	// an overflow skip whose target the request came back to (see run)
	returned bool
	// how long the upstream asked to wait (its Retry-After), if it did
	wait time.Duration
}

// usageBody is a request body rewritten to ask for stream usage.
type usageBody struct {
	body []byte
	top  protocol.Request
}

// route carries one request through its alias's targets.
type route struct {
	g        *Gateway
	alias    *Alias
	w        http.ResponseWriter
	r        *http.Request
	id       string
	clientID string  // the client's own X-Request-Id, if it sent one
	client   *client // who sent it, when clients are configured
	start    time.Time
	attempts []attempt
	tried    [4]attempt // attempts' first backing array
	order    [6]*Target // the plan's backing array, with weighted sets
	ttfb     time.Duration
	rule     string         // the group a pre-routing rule sent the request to
	deg      *degradeRecord // with a degradation chain
	color    *Color         // the color the request asked for, if it counts
	passage                 // its way past its targets' gates
	ask      attemptAsk     // what its attempts' observers see of it
	stream   bool           // the client asked for a stream
	injected bool           // the current attempt asked for stream usage on its own
	// an attempt was sent again after its connection failed as it was
	// written (see try)
	staleRetried bool
	priced       bool // costUSD is set
	spanRead     bool // span is looked up
	body         []byte
	top          protocol.Request // the body's fields, and where its model is
	api          *protocol.API    // what the request's endpoint is
	features     features
	// stream usage for groups that ask for it: a field spliced into the
	// body, if with is set, or else a body rewritten, if not nil
	inject    splice
	withUsage *usageBody
	usage     protocol.UsageScanner
	answered  *Target // the target whose response the client got
	// when the answering attempt started: a cloud priced per second
	// bills its attempt, not the time failed attempts took before it
	answerBegan time.Time
	status      int // the status the client got
	outcome     string
	// why an answer broke off after its first byte (outcome interrupted)
	interruption string
	costUSD      float64 // what the answer cost, if priced
	// no usage came with the answer: its tokens are the gateway's
	// estimate (see estimateUsage)
	estimated bool
	sent      int64 // the answer's body bytes passed on to the client
	// the target whose attempt the client left before any answer, and
	// when that attempt began: the request is charged there
	abandoned   *Target
	abandonedAt time.Time
	// what admission reserved for the request (see reserve)
	reservedTokens int64
	reservedTPM    int        // the tpm it was reserved at
	reservedUntil  time.Time  // when its reservation is paid off (see ratelimit.Minute.GiveBack)
	span           trace.Span // the request's span, if recorded (see traced)

	first attemptWriter          // the first attempt's writer; in use once its rt is set
	model protocol.ModelRewriter // the answer's model rewrite, if its alias asks for one
}

func (rt *route) run(ctx context.Context) error {
	al := rt.alias
	// deferred, so that a response aborted after its first byte (a panic
	// with http.ErrAbortHandler) gets its metrics too
	defer rt.finish()
	if rt.features.top == nil {
		rt.features = newFeatures(rt.body, rt.r.Header, &rt.top)
	}
	f := &rt.features
	rt.beginPassage()
	plan := rt.planFor(al, f)
	// targets passed over because they overflow: overflow is a
	// preference, not a limit, so what every later target refuses comes
	// back to them, up to their red line, before any degraded tier
	var spilled []*Target
	for i := 0; ; i++ {
		plan, spilled = rt.returnSpilled(plan, spilled, i)
		if i == len(plan) {
			break
		}
		t := plan[i]
		if err := ctx.Err(); err != nil {
			if rt.r.Context().Err() != nil {
				break // the client left
			}
			rt.attempts = append(rt.attempts, attempt{target: t, reason: because.Deadline})
			rt.traceSkip(t, because.Deadline)
			break
		}
		rt.rest = plan[i+1:]
		if why := rt.passage.admit(t); why != "" {
			rt.attempts = append(rt.attempts, attempt{target: t, reason: why})
			rt.traceSkip(t, why)
			switch {
			case why == because.Overflow:
				spilled = append(spilled, t)
			case rt.requeue == t:
				// left for a tier: should every tier fail, it is tried
				// last after all
				plan, rt.requeue = append(plan[:len(plan):len(plan)], t), nil
			}
			continue
		}
		window, done, err := rt.tryTarget(ctx, t, attemptTurn{more: i < len(plan)-1 || len(spilled) > 0, groupTrial: rt.trial})
		if done {
			return err
		}
		rt.minWindow = max(rt.minWindow, window)
	}
	if err := rt.r.Context().Err(); err != nil {
		// the client is gone; nobody reads an answer
		return caddyhttp.Error(499, err)
	}
	return rt.fail(al)
}

// beginPassage gives the passage what the gates read of the request.
func (rt *route) beginPassage() {
	rt.passage.features, rt.passage.bounds, rt.passage.client = &rt.features, rt, rt.client
}

// planFor is the request's targets in order: the alias's plan (its
// rules, its sets' order), a color's target first. It starts the
// mirrors' copies of a request without a color.
func (rt *route) planFor(al *Alias, f *features) []*Target {
	plan, rule := al.plan(f)
	if rule != nil {
		rt.rule = rule.Group
	}
	plan = al.ordered(plan, rt.order[:])
	if al.chain != nil {
		rt.deg = new(degradeRecord)
		rt.passage.deg = rt.deg
	}
	if c := rt.color; c != nil {
		// the color's target first; the alias's own after it, if the
		// color falls back
		colored := make([]*Target, 1, len(plan)+1)
		colored[0] = &c.Target
		if c.fallback {
			colored = append(colored, plan...)
		}
		return colored
	}
	if len(al.Mirrors) > 0 {
		rt.mirror()
	}
	return plan
}

// returnSpilled puts the targets passed over because they overflowed
// back into the plan at i, once i is its end or its first degraded tier,
// and returns the plan and what is still spilled.
func (rt *route) returnSpilled(plan, spilled []*Target, i int) ([]*Target, []*Target) {
	if len(spilled) == 0 || (i < len(plan) && plan[i].Tier == nil) {
		return plan, spilled
	}
	plan = slices.Concat(plan[:i], spilled, plan[i:])
	rt.returned = append(rt.returned, spilled...)
	for j := range rt.attempts {
		// its try now says how the overflow ended
		a := &rt.attempts[j]
		a.returned = a.reason == because.Overflow && slices.Contains(rt.returned, a.target)
	}
	return plan, nil
}

// tryTarget tries target t, on another of its endpoints each time, until
// it answers (done, with what the handler returns), its retries are
// spent, or it cannot take the request; window is the context window a
// context-length error proved the request needs (0: none).
func (rt *route) tryTarget(ctx context.Context, t *Target, turn attemptTurn) (window int, done bool, err error) {
	for n := 0; ; n++ {
		// the first attempt carries the group breaker's trial, if any;
		// try settles it however the attempt ends
		res, err := rt.try(ctx, t, turn)
		turn.groupTrial = false
		if res.done {
			return 0, true, err
		}
		if res.gone {
			return 0, false, nil
		}
		if res.stale {
			n--
			continue
		}
		why := rt.attempts[len(rt.attempts)-1].reason
		if why == because.ContextLength {
			return max(t.contextWindow(), 1), false, nil
		}
		// a time limit spent is not spent again on another endpoint:
		// the next target gets the request
		if n >= t.retries || res.verdict != verdictFailure || ctx.Err() != nil ||
			why == because.Timeout || why == because.FirstByte || (res.held && res.ep == nil) {
			return 0, false, nil // (a cloud that asked for time is not asked again now)
		}
		if res.ep != nil {
			turn.avoid = append(turn.avoid, res.ep)
		}
	}
}

// overflowed is the group:signal of the overflow the request left a
// target for, unless the answer came from that target after all.
func (rt *route) overflowed(answer *Target) string {
	if rt.overflow == "" || (answer != nil && slices.Contains(rt.returned, answer)) {
		return ""
	}
	return rt.overflow
}

// takenOut says why nothing may go to a target, whatever the request: its
// group is drained, its cloud's model list lacks the name, or the cloud
// asked to be left alone (a 429).
func (t *Target) takenOut(c clock.Clock) reason {
	if t.group.shared.drained.Load() {
		return because.Drained
	}
	if t.group.check.lacks(t.Model) {
		return because.Misconfig // the cloud's model list lacks the name
	}
	if t.group.vllm == nil && t.group.shared.breaker.HeldNow(c) {
		return because.RateLimited
	}
	return ""
}

// fail answers a request none of whose targets answered, telling the
// client whether a retry can help.
func (rt *route) fail(al *Alias) error {
	v := rt.failVerdict()
	rt.status = v.status
	rt.adviseRetry(&v)
	if v.status == http.StatusBadGateway {
		rt.outcome = outcomeUpstream
	} else {
		rt.outcome = outcomeUnavailable
	}
	return rt.api.WriteError(rt.w, protocol.Error{
		Status: v.status, Type: v.typ, Code: v.code,
		Message: rt.failMessage(al, &v),
	})
}

// failVerdict is what a request no target served is answered: its
// status, error code and type, and why.
type failVerdict struct {
	status    int
	code, typ string
	full      bool   // every target was only full
	closed    bool   // a cloud target was passed over for spend
	capped    bool   // the degradation cap held the tiers back
	format    string // the format the degraded tiers cannot produce
}

func (rt *route) failVerdict() failVerdict {
	v := failVerdict{status: http.StatusServiceUnavailable, code: "no_target_available", typ: protocol.TypeServer}
	timedOut := false
	v.full = len(rt.attempts) > 0
	for _, a := range rt.attempts {
		v.full = v.full && atCapacity(&a)
		switch a.reason {
		case because.NoEndpoint, because.RedLine, because.Unhealthy, because.Misconfig, because.StaleMetrics,
			because.Overflow, because.BreakerOpen, because.Degraded, because.ContextWindow, because.Drained, because.RateLimited,
			because.SLOBreach, because.KVPressure, because.Format, because.DegradeCap,
			because.Budget, because.SpendCap, because.BudgetHeld, because.SpendCapHeld, because.SpendUnknown:
		case because.Deadline:
			timedOut = true
		default:
			if a.status != http.StatusTooManyRequests { // busy, not failing
				v.status, v.code = http.StatusBadGateway, "all_targets_failed"
			}
		}
	}
	switch {
	case timedOut && v.status == http.StatusServiceUnavailable:
		v.status, v.code = http.StatusGatewayTimeout, "deadline_exceeded"
	case v.full:
		// self-hosted at its red line and the cloud rate-limited: the
		// alias has no room now, as an API over its rate limit says
		v.status, v.code, v.typ = http.StatusTooManyRequests, "capacity_exceeded", "requests"
	}
	for _, a := range rt.attempts {
		v.closed = v.closed || (a.reason == rt.noCloud && a.reason != "")
	}
	if v.closed {
		// the cloud would have served: what closed it is the answer
		switch rt.noCloud {
		case because.Budget:
			// the client's own budget: the OpenAI API's answer to a spent quota
			v.status, v.code, v.typ = http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota"
		case because.SpendCap:
			v.status, v.code = http.StatusServiceUnavailable, "cloud_spend_cap"
		case because.SpendUnknown:
			v.status, v.code = http.StatusServiceUnavailable, "cloud_spend_unknown"
		}
	}
	// the degradation chain held the tiers back: the alias is
	// unavailable for this request, not failing
	if n := len(rt.attempts); n > 0 && !v.closed {
		// only when the tiers were the last thing tried
		switch rt.attempts[n-1].reason {
		case because.DegradeCap:
			v.capped = true
		case because.Format:
			v.format = rt.unservedFormat()
		}
	}
	switch {
	case v.format != "":
		v.status, v.code, v.typ = http.StatusServiceUnavailable, "degraded_format_unsupported", protocol.TypeServer
	case v.capped:
		v.status, v.code, v.typ = http.StatusServiceUnavailable, "degrade_cap_reached", protocol.TypeServer
	}
	return v
}

// adviseRetry tells the client when to try again, if ever.
func (rt *route) adviseRetry(v *failVerdict) {
	switch never, after := rt.retryAdvice(rt.g.clock.Now()); {
	case v.capped && v.format == "":
		// the share falls as the window's oldest answers leave it
		rt.w.Header().Set("Retry-After", retryAfterSeconds(rt.alias.chain.retryAfter()))
	case v.closed:
		// the cloud opens again with the next UTC day (or month): an SDK
		// that would retry within minutes is told not to
		rt.w.Header().Set("Retry-After", retryAfterSeconds(rt.noCloudFor))
		if rt.noCloudFor > maxRetryAfter {
			rt.w.Header().Set("X-Should-Retry", "false")
		}
	case never:
		rt.w.Header().Set("X-Should-Retry", "false")
	case after > 0:
		rt.w.Header().Set("Retry-After", retryAfterSeconds(after))
	}
}

// failMessage says what was tried and why each target did not serve.
func (rt *route) failMessage(al *Alias, v *failVerdict) string {
	var sb strings.Builder
	sb.WriteString("no target could serve model `")
	sb.WriteString(al.name)
	switch {
	case v.format != "":
		// the upper targets failed and the tiers cannot produce it
		sb.WriteString("`: its degraded tiers cannot produce ")
		sb.WriteString(v.format)
		sb.WriteString(" output; tried: ")
	case v.full:
		sb.WriteString("`: every target is at capacity; tried: ")
	case v.capped:
		sb.WriteString("`: degraded answers are at their cap; tried: ")
	default:
		sb.WriteString("`; tried: ")
	}
	for i, a := range rt.attempts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a.target.Group)
		sb.WriteString(" (")
		sb.WriteString(string(a.reason))
		sb.WriteString(")")
	}
	return sb.String()
}

// atCapacity reports whether an attempt found its target full rather than
// failing: past its red line, overflowing (and every later target
// refused it as well), or rate-limited by its upstream.
func atCapacity(a *attempt) bool {
	switch a.reason {
	case because.RedLine, because.Overflow, because.RateLimited, because.BudgetHeld, because.SpendCapHeld:
		return true
	}
	return a.status == http.StatusTooManyRequests
}

// fallbackReasons renders the failed attempts for a response header.
func (rt *route) fallbackReasons() string {
	var sb strings.Builder
	for i, a := range rt.attempts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a.target.Group)
		sb.WriteByte(':')
		sb.WriteString(string(a.reason))
	}
	return sb.String()
}
