// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"io"
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/ratelimit"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// try makes one attempt on a target, at its turn. The error is the
// proxy's, for a response that has started.
func (rt *Route) try(ctx context.Context, t *routing.Target, turn routing.AttemptTurn) (res routing.AttemptResult, err error) {
	actx, cancel := rt.attemptContext(ctx, t)
	defer cancel()
	aw := rt.attemptWriterFor(t, turn, cancel)
	if t.Run.Timeout > 0 {
		defer startLimit(timeoutLimits, aw, t.Run.Timeout).stop()
	}
	n := len(rt.x.attempts)
	actx = rt.beginAttempt(actx, aw, turn)
	pr := rt.attemptRequest(actx, t, aw)
	if vg := t.Upstream.VLLM; vg != nil {
		// the selection policy reads the group and model from here, and
		// leaves the in-flight slot it reserved
		aw.slot = upstream.Slot{Group: vg, Model: t.Model, Avoid: turn.Avoid, Pin: pinFor(&rt.q, t), Class: rt.passage.Class}
		if vg.Affine() {
			aw.slot.Affinity = conversationKey(rt.r, &rt.q, vg)
		}
		defer aw.slot.Release()
	}
	firstByte := aw.firstByteLimit()
	defer func() { firstByte.stop() }() // also when the proxy panics
	t.Upstream.Inflight.Add(1)
	defer aw.unwatch() // also when the proxy panics
	// the observers see the attempt end however it ends (a mid-stream
	// failure ends in a panic), before its slot is given back
	defer rt.endAttempt(aw, &res, n)
	var end attemptEnd
	end.aborted, end.err = Proxy(t.Upstream.Run.Serve, aw, pr)
	t.Upstream.Inflight.Add(-1)
	aw.unwatch() // the answer's reading is over
	// an answer the proxy has read whole (a held 400) is no late one. A
	// limit that fired before may still be running (Stop does not wait
	// for it): an answer that is not committed yet must win the state
	// before it is sent
	firstByte.stop()
	firstByte = nil
	res.Endpoint = aw.slot.Endpoint
	err = rt.conclude(ctx, actx, t, aw, &end, &res)
	return res, err
}

// conclude judges an attempt whose proxying is over: an answer held for
// the client, an answer under way or whole, a client gone before the
// first byte, or a failure that hands the request on. The error is the
// proxy's, for an answer that has started.
func (rt *Route) conclude(ctx, actx context.Context, t *routing.Target, aw *attemptWriter, end *attemptEnd, res *routing.AttemptResult) error {
	end.clientGone = rt.r.Context().Err() != nil || aw.status == statusClientClosed || aw.out.lost
	if rt.answerHeld(aw, end) {
		res.Done, res.Verdict = true, routing.VerdictSuccess // the client's business, not the upstream's
		return nil
	}
	if aw.hold.status != 0 && !end.aborted && end.err == nil {
		// a whole answer without a body, held for its first body byte:
		// there is none to wait for
		aw.commit(aw.hold.status)
	}
	if aw.state.Load() == attemptCommitted {
		rt.endAnswer(ctx, actx, aw, end, res)
		return end.err
	}
	if end.clientGone {
		// the client left before the first byte: nobody's failure, and
		// no next target
		res.Gone = true
		rt.x.ans.abandoned, rt.x.ans.abandonedAt = t, aw.began // its upstream has the request
		return nil
	}
	rt.failedAttempt(ctx, actx, aw, end, res)
	return nil
}

// attemptEnd is how an attempt's proxying ended, as try judges it.
type attemptEnd struct {
	aborted    bool  // the proxy broke off (http.ErrAbortHandler)
	err        error // what the proxy returned
	clientGone bool  // the client left
	// a held 4xx, read whole, that moves the request on
	contextErr, modelMissing, unserved, previousMissing bool
}

// attemptContext is an attempt's context: one its time limits (see
// limitTimer) or the answer's watchdog may cancel. A later attempt gets
// the request's variables in a map of its own.
func (rt *Route) attemptContext(ctx context.Context, t *routing.Target) (context.Context, context.CancelFunc) {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if t.Run.Timeout > 0 || (t.Run.FirstByte > 0 && rt.q.Stream) || t.Run.Idle > 0 || t.Upstream.VLLM != nil {
		actx, cancel = context.WithCancel(ctx)
	}
	if rt.first.rt != nil {
		// a later attempt: the request's variables in a map of its own.
		// The proxy writes them as it prepares the request, while the
		// transport may still read them from an earlier attempt's dial
		// (net/http dials on a goroutine of its own, which outlives an
		// attempt given up).
		vars, _ := actx.Value(caddyhttp.VarsCtxKey).(map[string]any)
		actx = context.WithValue(actx, caddyhttp.VarsCtxKey, maps.Clone(vars))
	}
	return actx, cancel
}

// attemptWriterFor is the writer an attempt on t answers into: the
// route's own for the first attempt, a new one for each later one.
func (rt *Route) attemptWriterFor(t *routing.Target, turn routing.AttemptTurn, cancel context.CancelFunc) *attemptWriter {
	aw := &rt.first
	if aw.rt != nil {
		aw = new(attemptWriter)
	}
	*aw = attemptWriter{w: rt.w, rt: rt, target: t, api: apiFor(&rt.q, t), began: rt.f.Clock.Now()}
	aw.hold.badRequest, aw.guard.cancel = turn.More, cancel
	return aw
}

// attemptRequest is the request an attempt on t sends: the client's, with
// the attempt's context and t's body.
func (rt *Route) attemptRequest(actx context.Context, t *routing.Target, aw *attemptWriter) *http.Request {
	pr := rt.r.WithContext(actx)
	pr.Body = &aw.body
	if aw.api != rt.q.API {
		pr.ContentLength, rt.inj.injected = translatedRequest(&rt.q, rt.x.deg, pr, t, rt.passage.Class, &aw.body), false
	} else {
		pr.ContentLength, rt.inj.injected = rt.bodyFor(t, &aw.body)
	}
	// the transport resends a request that met a keep-alive connection
	// the upstream had closed (see serveInference)
	pr.GetBody = aw.body.replay
	return pr
}

// answerHeld judges a held 4xx, read whole: the next target gets the
// request only for a context-length error or a missing model (noted in
// end); any other is the answer, written here with the served model's
// name replaced, unless the first-byte timer abandoned the attempt first
// (an answer cut short is no answer: the attempt failed). It reports
// whether it answered.
func (rt *Route) answerHeld(aw *attemptWriter, end *attemptEnd) bool {
	if aw.hold.body == nil || end.aborted || end.err != nil {
		return false
	}
	switch aw.status {
	case http.StatusNotFound:
		end.modelMissing = aw.api.Errors.ModelNotFound(aw.hold.body.Bytes())
		// a vLLM older than Anthropic's API has no route for it
		end.unserved = aw.api.Events == protocol.EventsAnthropic && protocol.RouteMissing(aw.hold.body.Bytes())
	case http.StatusBadRequest:
		end.contextErr = aw.hold.badRequest && aw.api.Errors.ContextLength(aw.hold.body.Bytes())
	}
	end.previousMissing = previousMissing(&rt.q, aw.status, aw.hold.body.Bytes())
	if end.contextErr || end.modelMissing || end.unserved || end.previousMissing {
		return false
	}
	held := aw.hold.body.Bytes()
	body := rt.q.API.Errors.Upstream(held, aw.status, aw.target.Model, rt.x.alias.Name)
	if h := aw.Header(); string(body) != string(held) {
		delete(h, "Content-Length")
		h["Content-Type"] = []string{"application/json"}
	}
	if !aw.commit(aw.status) {
		return false
	}
	_, _ = aw.toClient(body)
	aw.release(true)
	return true
}

// endAnswer ends an answer that reached the client: its verdict and
// outcome, and the error event (or the abort) of one cut short. A stream
// the upstream ended cleanly before its last chunk was cut short all the
// same.
func (rt *Route) endAnswer(ctx, actx context.Context, aw *attemptWriter, end *attemptEnd, res *routing.AttemptResult) {
	cut := false
	if aw.out.scan != nil {
		if end.aborted && aw.out.sse && aw.out.scan.WantFinish && aw.api.Events == protocol.EventsAnthropic && aw.out.scan.Complete() {
			// closed after its message_stop, which nothing follows: the
			// answer is whole
			end.aborted = false
		}
		aw.finishBody(end.aborted)
		cut = !end.aborted && !aw.out.scan.Complete()
	}
	res.Done = true
	broken := end.aborted || cut
	aw.release(!broken)
	switch {
	case end.clientGone:
		// nobody's fault but the client's: not the upstream's failure
		if broken {
			rt.x.ans.outcome = routing.OutcomeClientCanceled
		}
	case broken && ctx.Err() != nil:
		// the gateway's deadline, which covers every attempt together,
		// cut it: no evidence against the upstream, as before the first
		// byte
		rt.x.ans.outcome = routing.OutcomeInterrupted
	case broken:
		res.Verdict = routing.VerdictFailure // the upstream broke off
		rt.x.ans.outcome = routing.OutcomeInterrupted
	default:
		res.Verdict = routing.VerdictSuccess
	}
	switch {
	case cut:
		rt.midStreamFailure(actx, aw, rt.endedEarly(aw))
	case end.aborted:
		rt.midStreamFailure(actx, aw, "the upstream connection failed mid-stream")
	}
}

// failedAttempt records why an attempt failed before its first byte; what
// it buffered is discarded, and the next target gets the request.
func (rt *Route) failedAttempt(ctx, actx context.Context, aw *attemptWriter, end *attemptEnd, res *routing.AttemptResult) {
	t := aw.target
	a := routing.Attempt{Target: t, Status: aw.status}
	switch {
	case end.contextErr:
		a.Reason = because.ContextLength
	case end.modelMissing:
		a.Reason = because.ModelNotFound
	case end.unserved:
		a.Reason = because.ProtocolUnsupported
	case end.previousMissing:
		a.Reason = because.PreviousResponseMissing
	case aw.hold.notAPI:
		a.Reason = because.NotAPI
	case aw.status != 0 && aw.hold.body == nil:
		// the upstream's own status, even if the timer fired after it
		a.Reason = because.OfStatus(aw.status)
		if aw.status == http.StatusNotFound && aw.api.Errors.ModelNotFound(aw.hold.notFound) {
			a.Reason = because.ModelNotFound
		}
		a.Wait = ratelimit.Asked(aw.header, rt.f.Clock.Now())
	case aw.state.Load() == attemptAbandoned:
		a.Reason = because.FirstByte
	case ctx.Err() != nil:
		a.Reason = because.Deadline
	case aw.state.Load() == attemptExpired || actx.Err() != nil:
		a.Reason = because.Timeout
	case end.aborted:
		a.Reason = because.ConnReset // the upstream broke off a held answer
	default:
		a.Reason = because.Classify(end.err)
		if a.Reason == because.NoEndpoint && aw.slot.Skip != "" {
			a.Reason = aw.slot.Skip // the policy knows better why
		}
		if a.Reason == because.ConnReset && !rt.staleRetried && because.WriteFailed(end.err) {
			// Go's transport resends a request whose pooled connection
			// failed on reading (see serveInference), not one that failed
			// while it was written: nothing of it was answered, and no
			// upstream is at fault yet
			rt.staleRetried = true
			res.Stale, res.Verdict = true, routing.VerdictNone
			// the pool's other connections to the upstream are as old:
			// the next attempt dials a new one
			t.Upstream.CloseIdleConnections()
			return
		}
	}
	rt.x.attempts = append(rt.x.attempts, a)
	if ep := res.Endpoint; ep != nil {
		res.Cause = breaker.Cause{Conn: routing.ConnFailure(a.Reason), Probe: ep.Prober.HealthSeq()}
		if a.Status == http.StatusTooManyRequests {
			res.Held = ep.Breaker.HoldFor(a.Wait, rt.f.Clock.Now())
		}
	} else if a.Status == http.StatusTooManyRequests && t.Upstream.VLLM == nil {
		// a cloud's rate limit that says when to come back: the group
		// gets nothing until then, rather than every request of a peak
		// in turn; a rate limit is no fault
		res.Held = t.Upstream.Shared.Breaker.HoldFor(a.Wait, rt.f.Clock.Now())
	}
	if c := rt.f.Logger.Check(zapcore.DebugLevel, "attempt failed"); c != nil {
		c.Write(zap.String("request_id", rt.x.id), rt.x.clientIDField(), zap.String("group", t.Group),
			zap.String("model", t.Model), zap.String("reason", string(a.Reason)), zap.Error(end.err))
	}
	res.Verdict = routing.VerdictOf(a.Reason, rt.r.Context())
}

// bodyFor sets b to the request body as target t gets it: its model name
// swapped in and, if its group asks for stream usage, the usage asked
// for (injected); on a tier with a max_tokens, clamped to it. It returns
// the body's length.
func (rt *Route) bodyFor(t *routing.Target, b *upstreamBody) (length int64, injected bool) {
	if t.Tier != nil && rt.x.deg != nil {
		rt.x.deg.ClampedTo = 0 // this attempt's, if it clamps
		if t.Tier.MaxTokens > 0 {
			if length, injected, ok := rt.inj.tierBody(&rt.q, rt.f.Watch, t, rt.passage.Class, b); ok {
				rt.x.deg.ClampedTo = t.Tier.MaxTokens
				return length, injected
			}
		}
	}
	return rt.inj.bodyFor(&rt.q, t, rt.passage.Class, b)
}

// Proxy runs the group's reverse proxy, turning its abort of a started
// response (a panic with http.ErrAbortHandler) into a flag.
func Proxy(h caddyhttp.MiddlewareHandler, w http.ResponseWriter, r *http.Request) (aborted bool, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			if rec != http.ErrAbortHandler { //nolint:errorlint // sentinel compared as the stdlib does
				panic(rec)
			}
			aborted = true
		}
	}()
	err = h.ServeHTTP(w, r, nopHandler)
	return aborted, err
}

var nopHandler = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// endedEarly is the cause of a stream the upstream ended before its last
// chunk, without breaking off: an error it sent, if it did.
func (rt *Route) endedEarly(aw *attemptWriter) string {
	if !aw.out.scan.Errored {
		return "the upstream ended the stream before its last chunk"
	}
	// in the gateway's words and shape, with no served model name
	msg := "the upstream failed mid-stream"
	if m := protocol.Capped(protocol.Renamed(aw.out.scan.UpstreamError, aw.target.Model, rt.x.alias.Name), 300); m != "" {
		msg += ": " + m
	}
	return msg
}

// midStreamFailure ends a response whose upstream failed after the first
// byte (cause: what the upstream did), or that the gateway cut (see
// watchdog) or ran out of time for. An SSE stream gets an error event, so
// the client never mistakes the cut for a clean end; anything else is
// aborted. Either way the cause goes to the log and the access log.
func (rt *Route) midStreamFailure(ctx context.Context, aw *attemptWriter, cause string) {
	if rt.r.Context().Err() != nil || aw.out.lost {
		panic(http.ErrAbortHandler)
	}
	msg := cause
	switch cut := aw.guard.cut.Load(); {
	case cut == cutIdle:
		msg = aw.target.Run.IdleCause
	case cut == cutDown:
		msg = causeEndpointDown
	case ctx.Err() != nil:
		msg = "the upstream did not finish in time"
	}
	rt.x.ans.interruption = msg
	if !aw.out.sse {
		rt.f.Logger.Warn("answer interrupted after the first byte", rt.interruptedFields(aw, msg)...)
		panic(http.ErrAbortHandler)
	}
	// the cut may have come inside an event: end it first, so that the
	// error is an event of its own rather than glued onto a partial one
	switch {
	case aw.out.tail == [2]byte{} || aw.out.tail == [2]byte{'\n', '\n'}:
	case aw.out.tail[1] == '\n':
		_, _ = io.WriteString(rt.w, "\n")
	default:
		_, _ = io.WriteString(rt.w, "\n\n")
	}
	_, _ = rt.w.Write(rt.q.API.Errors.StreamEvent(protocol.Error{Type: protocol.TypeServer, Code: "stream_interrupted", Message: msg}))
	_ = http.NewResponseController(rt.w).Flush()
	rt.f.Logger.Warn("stream interrupted after the first byte", rt.interruptedFields(aw, msg)...)
}

// interruptedFields are the log fields of an answer interrupted after
// its first byte, for the given cause.
func (rt *Route) interruptedFields(aw *attemptWriter, cause string) []zap.Field {
	return []zap.Field{zap.String("request_id", rt.x.id), rt.x.clientIDField(),
		zap.String("outcome", routing.OutcomeInterrupted),
		zap.String("cause", cause),
		zap.String("group", aw.target.Group),
		zap.String("model", aw.target.Model)}
}

// beginAttempt starts the record of an attempt and tells its target's
// observers; the context is the attempt's from then on.
func (rt *Route) beginAttempt(actx context.Context, aw *attemptWriter, turn routing.AttemptTurn) context.Context {
	if rt.ask.HTTP == nil {
		rt.ask = routing.AttemptRequest{Alias: rt.x.alias.Name, API: rt.q.API, Stream: rt.q.Stream, HTTP: rt.r, Parent: rt.x.traced(), Usage: &rt.x.usage}
	}
	t := aw.target
	aw.rec = routing.AttemptRecord{Target: t, Turn: turn, Number: len(rt.x.attempts) + 1, Began: aw.began, Request: &rt.ask}
	for _, o := range t.Run.Observers {
		actx = o.AttemptBegan(actx, &aw.rec)
	}
	return actx
}

// endAttempt completes the record of an attempt judged (res), before
// which the request had recorded n attempts, and tells its target's
// observers, last first.
func (rt *Route) endAttempt(aw *attemptWriter, res *routing.AttemptResult, n int) {
	a := &aw.rec
	a.Result, a.Status, a.Slot = *res, aw.status, &aw.slot
	if len(rt.x.attempts) > n {
		a.Failed = &rt.x.attempts[len(rt.x.attempts)-1]
	}
	if rt.q.Stream && rt.x.ans.ttfb > 0 && rt.x.ans.target == a.Target {
		a.FirstByte = rt.x.start.Add(rt.x.ans.ttfb).Sub(a.Began)
	}
	obs := a.Target.Run.Observers
	for i := len(obs) - 1; i >= 0; i-- {
		obs[i].AttemptEnded(a)
	}
}

// conversationKey is request q's conversation key for group vg's
// affinity: the session it names in the group's header or body field, if
// any, else its prompt's start.
func conversationKey(r *http.Request, q *routing.Asked, vg *upstream.VLLMGroup) uint64 {
	header, field := vg.Session()
	if header != "" {
		if v := r.Header.Get(header); v != "" {
			return protocol.SessionKey(v)
		}
	}
	if field != "" {
		if v := gjson.GetBytes(q.Body, field); v.Type == gjson.String && v.Str != "" {
			return protocol.SessionKey(v.Str)
		}
	}
	return q.Top.AffinityKey()
}
