// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/ratelimit"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// Route carries one request through its alias's targets.
type Route struct {
	f       *Front
	w       http.ResponseWriter
	r       *http.Request
	x       exchange        // the record of the request
	q       routing.Asked   // what it asks
	passage routing.Passage // its way past its targets' gates
	ask     routing.AttemptRequest
	inj     usageAsk
	held    routing.Reservation // what admission reserved of its client's limits
	tried   [2]routing.Attempt  // attempts' first backing array: a request rarely fails more
	order   [6]*routing.Target  // the plan's backing array, with weighted sets
	// an attempt was sent again after its connection failed as it was
	// written (see try)
	staleRetried bool

	first attemptWriter          // the first attempt's writer; in use once its rt is set
	model protocol.ModelRewriter // the answer's model rewrite, if its alias asks for one
	heads RequestHeads           // the values of the headers it adds
}

func (rt *Route) run(ctx context.Context) error {
	al := rt.x.alias
	// deferred, so that a response aborted after its first byte (a panic
	// with http.ErrAbortHandler) gets its metrics too
	defer rt.finish()
	f := &rt.q.Features
	plan := holderPlan(rt.f.Responses, &rt.q, rt.planFor(al, f), &rt.order)
	var done bool
	var err error
	switch ahead := queueAhead(rt.passage.Sheddable, plan); {
	case ahead != nil:
		// others wait for the group already: behind them, not past them
		done, err = rt.waitInQueue(ctx, plan, ahead, false)
	default:
		if done, err = rt.pass(ctx, plan); !done && rt.passage.Sheddable {
			done, err = rt.waitInQueue(ctx, plan, queueOf(rt.x.attempts), true)
		}
	}
	if done {
		return err
	}
	if err := rt.r.Context().Err(); err != nil {
		// the client is gone; nobody reads an answer
		return caddyhttp.Error(499, err)
	}
	return rt.fail(al)
}

// pass takes the request past its plan's targets in order, until one
// answers (done, with what the handler returns).
func (rt *Route) pass(ctx context.Context, plan []*routing.Target) (done bool, err error) {
	// targets passed over because they overflow: overflow is a
	// preference, not a limit, so what every later target refuses comes
	// back to them, up to their red line, before any degraded tier
	var spilled []*routing.Target
	for i := 0; ; i++ {
		plan, spilled = rt.returnSpilled(plan, spilled, i)
		if i == len(plan) {
			return false, nil
		}
		t := plan[i]
		if err := ctx.Err(); err != nil {
			if rt.r.Context().Err() != nil {
				return false, nil // the client left
			}
			rt.x.attempts = append(rt.x.attempts, routing.Attempt{Target: t, Reason: because.Deadline})
			traceSkip(&rt.x, t, because.Deadline)
			return false, nil
		}
		rt.passage.Rest = plan[i+1:]
		if why := rt.passage.Admit(t); why != "" {
			rt.x.attempts = append(rt.x.attempts, routing.Attempt{Target: t, Reason: why})
			traceSkip(&rt.x, t, why)
			switch {
			case why == because.Overflow:
				spilled = append(spilled, t)
			case rt.passage.Requeue == t:
				// left for a tier: should every tier fail, it is tried
				// last after all
				plan, rt.passage.Requeue = append(plan[:len(plan):len(plan)], t), nil
			}
			continue
		}
		window, done, err := rt.tryTarget(ctx, t, routing.AttemptTurn{More: i < len(plan)-1 || len(spilled) > 0, GroupTrial: rt.passage.Trial})
		if done {
			return true, err
		}
		rt.passage.MinWindow = max(rt.passage.MinWindow, window)
	}
}

// beginPassage gives the passage what the gates read of the request.
func (rt *Route) beginPassage() {
	rt.passage.Bounds = routing.TokenBounds{Asked: &rt.q, Client: rt.x.client, Reserve: int64(rt.f.ReserveTokens)}
}

// Heads is where the route keeps what it reads of its request's head
// (its ids), made with the route so that they cost no allocation of
// their own.
func (rt *Route) Heads() *RequestHeads { return &rt.heads }

// planFor is the request's targets in order: the alias's plan (its
// rules, its sets' order), a color's target first. It starts the
// mirrors' copies of a request without a color.
func (rt *Route) planFor(al *routing.Alias, f *routing.Features) []*routing.Target {
	plan, rule := al.Plan(f)
	if rule != nil {
		rt.x.rule = rule.Group
	}
	plan = al.Ordered(plan, rt.order[:])
	if al.Chain != nil {
		rt.x.deg = new(routing.DegradeRecord)
		rt.passage.Degradation = rt.x.deg
	}
	if c := rt.x.color; c != nil {
		// the color's target first; the alias's own after it, if the
		// color falls back
		colored := make([]*routing.Target, 1, len(plan)+1)
		colored[0] = &c.Target
		if c.FallsBack {
			colored = append(colored, plan...)
		}
		return colored
	}
	if len(al.Mirrors) > 0 {
		sendMirrors(al, rt.f, rt.r, rt.x.id, &rt.q, &rt.inj, rt.passage.Sheddable)
	}
	return plan
}

// returnSpilled puts the targets passed over because they overflowed
// back into the plan at i, once i is its end or its first degraded tier,
// and returns the plan and what is still spilled.
func (rt *Route) returnSpilled(plan, spilled []*routing.Target, i int) ([]*routing.Target, []*routing.Target) {
	if len(spilled) == 0 || (i < len(plan) && plan[i].Tier == nil) {
		return plan, spilled
	}
	plan = slices.Concat(plan[:i], spilled, plan[i:])
	rt.passage.Returned = append(rt.passage.Returned, spilled...)
	for j := range rt.x.attempts {
		// its try now says how the overflow ended
		a := &rt.x.attempts[j]
		a.Returned = a.Reason == because.Overflow && slices.Contains(rt.passage.Returned, a.Target)
	}
	return plan, nil
}

// tryTarget tries target t, on another of its endpoints each time, until
// it answers (done, with what the handler returns), its retries are
// spent, or it cannot take the request; window is the context window a
// context-length error proved the request needs (0: none).
func (rt *Route) tryTarget(ctx context.Context, t *routing.Target, turn routing.AttemptTurn) (window int, done bool, err error) {
	for n := 0; ; n++ {
		// the first attempt carries the group breaker's trial, if any;
		// try settles it however the attempt ends
		res, err := rt.try(ctx, t, turn)
		turn.GroupTrial = false
		if res.Done {
			return 0, true, err
		}
		if res.Gone {
			return 0, false, nil
		}
		if res.Stale {
			n--
			continue
		}
		why := rt.x.attempts[len(rt.x.attempts)-1].Reason
		if why == because.ContextLength {
			return max(t.Window(), 1), false, nil
		}
		// a time limit spent is not spent again on another endpoint:
		// the next target gets the request
		if n >= t.Run.Retries || res.Verdict != routing.VerdictFailure || ctx.Err() != nil ||
			why == because.Timeout || why == because.FirstByte || (res.Held && res.Endpoint == nil) {
			return 0, false, nil // (a cloud that asked for time is not asked again now)
		}
		if res.Endpoint != nil {
			turn.Avoid = append(turn.Avoid, res.Endpoint)
		}
	}
}

// overflowed is the group:signal of the overflow the request left a
// target for, unless the answer came from that target after all.
func (rt *Route) overflowed(answer *routing.Target) string {
	if rt.passage.Overflow == "" || (answer != nil && slices.Contains(rt.passage.Returned, answer)) {
		return ""
	}
	return rt.passage.Overflow
}

// fail answers a request none of whose targets answered, telling the
// client whether a retry can help.
func (rt *Route) fail(al *routing.Alias) error {
	v := rt.failVerdict()
	rt.x.ans.status = v.status
	rt.adviseRetry(&v)
	if v.status == http.StatusBadGateway {
		rt.x.ans.outcome = routing.OutcomeUpstream
	} else {
		rt.x.ans.outcome = routing.OutcomeUnavailable
	}
	return rt.q.API.WriteError(rt.w, protocol.Error{
		Status: v.status, Type: v.typ, Code: v.code, Param: v.param,
		Message: rt.failMessage(al, &v),
	})
}

// failVerdict is what a request no target served is answered: its
// status, error code and type, and why.
type failVerdict struct {
	status           int
	code, typ, param string
	full             bool   // every target was only full
	closed           bool   // a cloud target was passed over for spend
	capped           bool   // the degradation cap held the tiers back
	format           string // the format the degraded tiers cannot produce
}

func (rt *Route) failVerdict() failVerdict {
	v := failVerdict{status: http.StatusServiceUnavailable, code: "no_target_available", typ: protocol.TypeServer}
	timedOut := false
	v.full = len(rt.x.attempts) > 0
	for _, a := range rt.x.attempts {
		v.full = v.full && atCapacity(&a)
		switch a.Reason {
		case because.NoEndpoint, because.RedLine, because.ClassReserve, because.Sheddable, because.Unhealthy, because.Misconfig, because.StaleMetrics,
			because.Overflow, because.BreakerOpen, because.Degraded, because.ContextWindow, because.Drained, because.RateLimited,
			because.SLOBreach, because.KVPressure, because.Format, because.DegradeCap, because.ProtocolUnsupported,
			because.PreviousResponseMissing, because.Budget, because.SpendCap, because.BudgetHeld, because.SpendCapHeld, because.SpendUnknown:
		case because.Deadline:
			timedOut = true
		default:
			if a.Status != http.StatusTooManyRequests { // busy, not failing
				v.status, v.code = http.StatusBadGateway, "all_targets_failed"
			}
		}
	}
	switch {
	case rt.q.PreviousID() != "" && allFor(rt.x.attempts, because.PreviousResponseMissing):
		// no target holds the response the follow-up names: as OpenAI
		// answers it
		v.status, v.code, v.typ, v.param = http.StatusBadRequest, "previous_response_not_found", protocol.TypeInvalidRequest, "previous_response_id"
	case unserved(rt.x.attempts) && len(rt.untranslatable()) > 0:
		// the request holds what the targets that would translate it
		// cannot carry: the request's to change
		v.status, v.code, v.typ = http.StatusBadRequest, "untranslatable", protocol.TypeInvalidRequest
	case unserved(rt.x.attempts):
		// no target of the alias speaks the request's API: nothing to
		// wait for (Claude Code counts its tokens itself when
		// count_tokens is not found)
		v.status, v.code, v.typ = http.StatusNotFound, "api_not_served", protocol.TypeInvalidRequest
	case timedOut && v.status == http.StatusServiceUnavailable:
		v.status, v.code = http.StatusGatewayTimeout, "deadline_exceeded"
	case v.full:
		// self-hosted at its red line and the cloud rate-limited: the
		// alias has no room now, as an API over its rate limit says
		v.status, v.code, v.typ = http.StatusTooManyRequests, "capacity_exceeded", "requests"
	}
	for _, a := range rt.x.attempts {
		v.closed = v.closed || (a.Reason == rt.passage.NoCloud && a.Reason != "")
	}
	if v.closed {
		// the cloud would have served: what closed it is the answer
		switch rt.passage.NoCloud {
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
	if n := len(rt.x.attempts); n > 0 && !v.closed {
		// only when the tiers were the last thing tried
		switch rt.x.attempts[n-1].Reason {
		case because.DegradeCap:
			v.capped = true
		case because.Format:
			v.format = rt.x.deg.UnservedFormat(rt.x.attempts, rt.q.Body)
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
func (rt *Route) adviseRetry(v *failVerdict) {
	switch never, after := retryAdvice(rt.x.attempts, rt.f.Clock.Now()); {
	case v.capped && v.format == "":
		// the share falls as the window's oldest answers leave it
		rt.w.Header().Set("Retry-After", ratelimit.RetryAfter(rt.x.alias.Chain.RetryAfter()))
	case v.closed:
		// the cloud opens again with the next UTC day (or month): an SDK
		// that would retry within minutes is told not to
		rt.w.Header().Set("Retry-After", ratelimit.RetryAfter(rt.passage.NoCloudFor))
		if rt.passage.NoCloudFor > maxRetryAfter {
			rt.w.Header().Set("X-Should-Retry", "false")
		}
	case never:
		rt.w.Header().Set("X-Should-Retry", "false")
	case after > 0:
		rt.w.Header().Set("Retry-After", ratelimit.RetryAfter(after))
	}
}

// failMessage says what was tried and why each target did not serve.
func (rt *Route) failMessage(al *routing.Alias, v *failVerdict) string {
	var sb strings.Builder
	sb.WriteString("no target could serve model `")
	sb.WriteString(al.Name)
	switch {
	case v.code == "previous_response_not_found":
		sb.WriteString("`: none of its targets holds the response `")
		sb.WriteString(rt.q.PreviousID())
		sb.WriteString("` that previous_response_id names (it may have been stored by an upstream no longer in use, or not at all); send the conversation's input again without it; tried: ")
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
	for i, a := range rt.x.attempts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a.Target.Group)
		sb.WriteString(" (")
		sb.WriteString(string(a.Reason))
		sb.WriteString(")")
	}
	rt.lossesMessage(&sb)
	return sb.String()
}

// untranslatable is what kept a Messages request from the targets that
// would have taken it translated into chat completions.
func (rt *Route) untranslatable() []string {
	var lost []string
	for _, a := range rt.x.attempts {
		if on, lossy := a.Target.Upstream.TranslatesMessages(); a.Reason == because.ProtocolUnsupported && on && !lossy {
			for _, l := range rt.q.Losses(a.Target.Upstream.Kind == upstream.KindVLLM) {
				if !slices.Contains(lost, l) {
					lost = append(lost, l)
				}
			}
		}
	}
	return lost
}

// lossesMessage tells what kept a Messages request from the targets that
// would have taken it translated (see untranslatable).
func (rt *Route) lossesMessage(sb *strings.Builder) {
	lost := rt.untranslatable()
	if len(lost) == 0 {
		return
	}
	sb.WriteString("; chat completions cannot carry the request's ")
	sb.WriteString(strings.Join(lost, ", "))
	sb.WriteString(" (a group's `translate lossy` leaves them out)")
}

// unserved reports whether every target was passed over for the
// request's API.
func unserved(attempts []routing.Attempt) bool {
	return allFor(attempts, because.ProtocolUnsupported)
}

// allFor reports whether every target was passed over for one reason.
func allFor(attempts []routing.Attempt, why because.Reason) bool {
	for _, a := range attempts {
		if a.Reason != why {
			return false
		}
	}
	return len(attempts) > 0
}

// atCapacity reports whether an attempt found its target full rather than
// failing: past its red line, overflowing (and every later target
// refused it as well), or rate-limited by its upstream.
func atCapacity(a *routing.Attempt) bool {
	switch a.Reason {
	case because.RedLine, because.ClassReserve, because.Sheddable, because.Overflow, because.RateLimited, because.BudgetHeld, because.SpendCapHeld:
		return true
	}
	return a.Status == http.StatusTooManyRequests
}

// fallbackReasons renders the failed attempts for a response header.
func (rt *Route) fallbackReasons() string {
	var sb strings.Builder
	for i, a := range rt.x.attempts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a.Target.Group)
		sb.WriteByte(':')
		sb.WriteString(string(a.Reason))
	}
	return sb.String()
}

// setRouteHeaders tells the client where its request landed: the
// X-Hybrid-* headers. It runs once, as the answer commits: the values
// are the route's own array (rt.heads), which a second call would
// overwrite under the headers already set.
func (rt *Route) setRouteHeaders(h http.Header, t *routing.Target) {
	// canonical keys, assigned directly, their values in the route's
	// array
	v := rt.heads.route[:2]
	v[0], v[1] = t.Group, t.Model
	h["X-Hybrid-Target"] = v[0:1:1]
	if rt.x.alias.ModelJSON == nil {
		// the answer names the upstream's model anyway (response_model
		// upstream); otherwise no served model name reaches the client
		h["X-Hybrid-Model"] = v[1:2:2]
	}
	if len(rt.x.attempts) > 0 {
		fb := []string{"true", rt.fallbackReasons()}
		h["X-Hybrid-Fallback"], h["X-Hybrid-Fallback-Reason"] = fb[0:1:1], fb[1:2:2]
	}
	if o := rt.overflowed(t); o != "" {
		h.Set("X-Hybrid-Overflow", o)
	}
	if rt.x.rule != "" {
		h.Set("X-Hybrid-Route", rt.x.rule)
	}
}

// finish settles the request's outcome and records its metrics.
func (rt *Route) finish() {
	switch {
	case rt.x.ans.outcome != "":
	case rt.r.Context().Err() != nil && rt.x.ans.target == nil:
		rt.x.ans.outcome = routing.OutcomeClientCanceled
	case rt.x.ans.status >= 500:
		rt.x.ans.outcome = routing.OutcomeUpstream
	case rt.x.ans.status >= 400:
		rt.x.ans.outcome = routing.OutcomeClientError
	default:
		rt.x.ans.outcome = routing.OutcomeOK
	}
	if rt.f.Money.Priced && rt.x.ans.target != nil && rt.x.ans.interruption == "" && rt.r.Context().Err() == nil {
		// a journaled charge outlives a kill; the answer it is for must
		// have left first: until the handler returns, a short one waits
		// in the server's buffer
		_ = http.NewResponseController(rt.w).Flush()
	}
	rt.x.ans.overflow = rt.overflowed(rt.x.ans.target)
	rt.x.estimateUsage(&rt.passage.Bounds, rt.f.Name)
	meter(rt.f, &rt.x)
	if c := rt.x.alias.Chain; c != nil {
		c.Settle(rt.x.deg, rt.x.ans.target != nil && rt.x.ans.status < 500, rt.f.Clock.Now())
	}
	at := rt.f.Clock.Now()
	rt.cost(at)
	rt.passage.Hold.Release(rt.f.Money) // once its spend is booked: never neither counts
	rt.held.Settle(rt.x.client, &rt.x.usage, at)
	traceOutcome(&rt.x)
	noteResponse(rt.f.Responses, &rt.x)
	if last := &rt.x.ans.held; last[1] != 0 {
		// the answer's end, now that what it was is booked
		last[1] = 0
		_, _ = rt.w.Write(last[:1])
	}
}

// cost prices the request on the side that served it: a cloud's tokens
// or seconds at its prices, self-hosted tokens at the recent fixed cost
// per token; it goes into the ledger, the cloud spend and the log. at is
// when the answer ended.
func (rt *Route) cost(at time.Time) {
	t, began := rt.x.charged()
	if t == nil || rt.f.Money.Ledger == nil || (rt.q.API != nil && rt.q.API.Free) {
		return
	}
	cc := t.Upstream.Cost
	usd, cloudUSD := 0.0, 0.0
	switch {
	case cc == nil:
	case t.Upstream.Cloud():
		usd = cc.RequestCost(tokensOf(&rt.x.usage.Usage), at.Sub(began))
		cloudUSD = usd
		routing.CostTotal.WithLabelValues(rt.f.Name, t.Group, rt.x.clientName(), routing.BillingBusiness).Add(usd)
	default:
		usd = float64(rt.x.usage.Prompt+rt.x.usage.Completion) * rt.f.Money.SelfCostPerToken()
	}
	rt.f.Money.Charge(rt.x.client, journal.Charge{Client: rt.x.clientName(), SelfHosted: t.Upstream.Kind == upstream.KindVLLM,
		Prompt: rt.x.usage.Prompt, Completion: rt.x.usage.Completion, Cached: rt.x.usage.Cached, CacheWrite: rt.x.usage.CacheWrite,
		Reasoning: rt.x.usage.Reasoning, CloudUSD: cloudUSD, Estimated: rt.x.ans.estimated}, at)
	rt.x.ans.costUSD, rt.x.ans.priced = usd, cc != nil
}
