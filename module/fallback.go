// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Reasons an attempt failed. They are a fixed vocabulary: they appear in
// error messages, logs and headers, and never carry addresses.
const (
	reasonConnRefused = "connection_refused"
	reasonConnReset   = "connection_reset"
	reasonDial        = "dial_error"
	reasonTimeout     = "timeout"
	reasonDeadline    = "deadline"
	reasonNoEndpoint  = "no_endpoint"
	reasonUpstream    = "upstream_error"

	reasonFirstByte     = "first_byte_timeout"
	reasonContextLength = "context_length"
	reasonContextWindow = "context_window"
	reasonOverflow      = "overflow"
	reasonBreakerOpen   = "breaker_open"
	reasonDrained       = "drained"
)

// credentialHeaders are the client's credentials and account headers,
// never sent upstream: each group speaks for itself. The keys are in
// canonical form.
var credentialHeaders = []string{"Authorization", "Api-Key", "X-Api-Key", "Cookie", "Openai-Organization", "Openai-Project"}

// statusClientClosed is what Caddy's proxy reports when the client left;
// it is nobody's answer.
const statusClientClosed = 499

// fallbackStatus reports whether an upstream answer with this status
// moves the request to the next target.
func fallbackStatus(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// attempt is the record of one try of one target.
type attempt struct {
	target *Target
	reason string // empty when it answered
	status int    // upstream status, when it answered with a fallback status
}

// serveInference handles a JSON POST whose model is an alias.
func (g *Gateway) serveInference(w http.ResponseWriter, r *http.Request, id string) error {
	rt := &route{g: g, w: w, r: r, id: id, start: time.Now()}
	if extra := logFields(r); extra != nil {
		// the request id, and the routing record once there is one
		extra.Add(zap.Inline(rt))
	}
	body, err := readBody(r, g.MaxBodySize)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			return writeError(w, http.StatusRequestEntityTooLarge, errTypeInvalidRequest, "request_too_large", "",
				"request body exceeds the limit of "+strconv.FormatInt(g.MaxBodySize, 10)+" bytes")
		}
		return writeError(w, http.StatusBadRequest, errTypeInvalidRequest, "invalid_body", "",
			"could not read the request body")
	}
	var isObject bool
	top := &rt.top
	*top, isObject = scanTop(body, g.watch...)
	if !isObject {
		return writeError(w, http.StatusBadRequest, errTypeInvalidRequest, "invalid_json", "",
			"the request body is not a valid JSON object")
	}
	stream, wantsUsage := top.stream, top.wantsUsage
	if top.model == nil {
		return writeError(w, http.StatusNotFound, errTypeInvalidRequest, "model_not_found", "model",
			"you must provide a model parameter")
	}
	if !top.modelString() {
		return writeError(w, http.StatusBadRequest, errTypeInvalidRequest, "invalid_type", "model",
			"model must be a string")
	}
	if top.models > 1 {
		// the alias and the rewrite see the first one, the upstream's
		// decoder the last: the client would choose the upstream model
		return writeError(w, http.StatusBadRequest, errTypeInvalidRequest, "invalid_json", "model",
			"the request body has more than one model field")
	}
	al, ok := g.alias(top)
	if !ok {
		return writeError(w, http.StatusNotFound, errTypeInvalidRequest, "model_not_found", "model",
			"The model `"+top.modelName()+"` does not exist.")
	}
	for _, h := range credentialHeaders {
		delete(r.Header, h) // canonical keys
	}
	if v := r.Header["X-Request-Id"]; len(v) != 1 || v[0] != id {
		r.Header.Set("X-Request-Id", id)
	}

	ctx := r.Context()
	if g.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(g.Deadline))
		defer cancel()
	}

	rt.alias, rt.stream = al, stream
	rt.attempts = rt.tried[:0]
	if stream && !wantsUsage && !g.DisableStreamUsage && completionsPath(r.URL.Path) {
		// ask for the usage chunk, to count the tokens; the client does
		// not see it
		if sp, rewritten, ok := withStreamUsage(body, top); ok {
			rt.injected = true
			if rewritten != nil {
				body = rewritten
				*top, _ = scanTop(body, g.watch...) // the model may have moved
			} else {
				rt.inject = sp
			}
		}
	}
	rt.body = body
	return rt.run(ctx)
}

// alias returns the alias the body's model names. A name without escapes
// is looked up in place, without a copy.
func (g *Gateway) alias(top *topFields) (*Alias, bool) {
	name := top.model[1 : len(top.model)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		al, ok := g.aliases[top.modelName()]
		return al, ok
	}
	al, ok := g.aliases[string(name)]
	return al, ok
}

// completionsPath reports whether a path is a (chat) completions endpoint,
// where stream_options applies.
func completionsPath(path string) bool {
	return strings.HasSuffix(path, "/chat/completions") || strings.HasSuffix(path, "/completions")
}

// route carries one request through its alias's targets.
type route struct {
	g        *Gateway
	alias    *Alias
	w        http.ResponseWriter
	r        *http.Request
	id       string
	start    time.Time
	stream   bool
	attempts []attempt
	tried    [4]attempt // attempts' first backing array
	ttfb     time.Duration
	rule     string // the group a pre-routing rule sent the request to
	overflow string // group:signal of an overflow skip
	injected bool   // the gateway asked for stream usage on its own
	body     []byte
	top      topFields // the body's fields, and where its model is
	features features
	inject   splice // the stream usage field spliced into the body, if with is set
	usage    usageScanner
	answered *Target // the target whose response the client got
	status   int     // the status the client got
	outcome  string
	costUSD  float64 // what the answer cost, if priced
	priced   bool

	first attemptWriter // the first attempt's writer; in use once its rt is set
}

func (rt *route) run(ctx context.Context) error {
	al := rt.alias
	// deferred, so that a response aborted after its first byte (a panic
	// with http.ErrAbortHandler) gets its metrics too
	defer rt.finish()
	rt.features = newFeatures(rt.body, rt.r.Header, &rt.top)
	f := &rt.features
	plan, rule := al.plan(f)
	if rule != nil {
		rt.rule = rule.Target
	}
	minWindow := 0 // a context-length error proved the request needs more
	for i, t := range plan {
		if err := ctx.Err(); err != nil {
			if rt.r.Context().Err() != nil {
				break // the client left
			}
			rt.attempts = append(rt.attempts, attempt{target: t, reason: reasonDeadline})
			break
		}
		if reason := rt.skip(t, f, minWindow); reason != "" {
			rt.attempts = append(rt.attempts, attempt{target: t, reason: reason})
			continue
		}
		groupTrial := false
		if bc := t.group.Breaker; bc != nil {
			ok, trial := t.group.shared.breaker.allow(now())
			if !ok {
				rt.attempts = append(rt.attempts, attempt{target: t, reason: reasonBreakerOpen})
				continue
			}
			groupTrial = trial
		}
		var avoid []*endpoint
		for n := 0; ; n++ {
			// the first attempt carries the group breaker's trial, if any;
			// try settles it however the attempt ends
			done, err, ep, verdict := rt.try(ctx, t, avoid, i < len(plan)-1, groupTrial)
			groupTrial = false
			if done {
				return err
			}
			reason := rt.attempts[len(rt.attempts)-1].reason
			if reason == reasonContextLength {
				minWindow = max(minWindow, t.contextWindow(), 1)
				break
			}
			if n >= t.Retries || verdict != verdictFailure || ctx.Err() != nil {
				break
			}
			if ep != nil {
				avoid = append(avoid, ep)
			}
		}
	}
	if err := rt.r.Context().Err(); err != nil {
		// the client is gone; nobody reads an answer
		return caddyhttp.Error(499, err)
	}
	return rt.fail(al)
}

// skip returns why the target must not be tried for this request, if so:
// its group overflows, or its context window cannot hold the request.
func (rt *route) skip(t *Target, f *features, minWindow int) string {
	if t.group.shared.drained.Load() {
		return reasonDrained
	}
	if w := t.contextWindow(); w > 0 {
		if (minWindow > 0 && w <= minWindow) || f.exceeds(w) {
			return reasonContextWindow
		}
	}
	grp := t.group
	if oc := grp.Overflow; oc != nil && grp.vllm != nil {
		t0 := now()
		if on, signal := oc.evaluate(&grp.shared.overflow, grp.vllm.signals(t0), t0, rt.g.logger, grp.name); on {
			if rt.overflow == "" {
				rt.overflow = grp.name + ":" + signal
			}
			return reasonOverflow
		}
	}
	return ""
}

// Verdicts of an attempt for the breakers.
const (
	verdictNone = iota // no evidence either way (client left, skipped)
	verdictSuccess
	verdictFailure
)

// verdict judges an attempt's outcome for the breakers: an answer is a
// success (a 4xx is the client's business), an upstream failure is a
// failure, and anything the upstream cannot be blamed for is neither.
func (grp *Group) verdict(reason string, answered bool, client context.Context) int {
	if client.Err() != nil {
		return verdictNone
	}
	if answered {
		return verdictSuccess
	}
	switch reason {
	case reasonDeadline, reasonContextLength, reasonNoEndpoint, reasonRedLine, reasonUnhealthy,
		reasonMisconfig, reasonStaleMetrics, reasonBreakerOpen, reasonOverflow, reasonContextWindow, reasonDrained,
		reasonAvoided:
		return verdictNone
	}
	return verdictFailure
}

// judge feeds a verdict to a breaker and logs it opening.
func (rt *route) judge(b *breaker, bc *BreakerConfig, verdict int, trial bool, group, endpoint string) {
	switch verdict {
	case verdictSuccess:
		if b.success(trial) {
			fields := []zap.Field{zap.String("group", group)}
			if endpoint != "" {
				fields = append(fields, zap.String("endpoint", endpoint))
			}
			rt.g.logger.Info("breaker closed: the half-open trial succeeded", fields...)
		}
	case verdictFailure:
		if b.failure(bc, now(), trial) {
			_, until := b.view()
			fields := []zap.Field{zap.String("group", group), zap.Time("until", until), zap.Bool("half_open_trial_failed", trial)}
			if endpoint != "" {
				fields = append(fields, zap.String("endpoint", endpoint))
			}
			rt.g.logger.Warn("breaker open", fields...)
		}
	default:
		b.release(trial)
	}
}

// try makes one attempt on a target. It reports done when the response
// has started (the client got bytes, successful or not), so that no
// other target may be tried, and the vLLM endpoint it went to, if known.
func (rt *route) try(ctx context.Context, t *Target, avoid []*endpoint, more, groupTrial bool) (done bool, err error, ep *endpoint, verdict int) {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if t.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, time.Duration(t.Timeout))
	} else if t.FirstByteTimeout > 0 && rt.stream {
		actx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	aw := &rt.first
	if aw.rt != nil {
		aw = new(attemptWriter)
	}
	*aw = attemptWriter{w: rt.w, rt: rt, target: t, holdBadRequest: more}
	var splices [2]splice
	n := 0
	if sp, ok := t.modelSplice(&rt.top); ok {
		splices[n], n = sp, n+1
	}
	if rt.inject.with != nil {
		splices[n], n = rt.inject, n+1
	}
	pr := rt.r.WithContext(actx)
	pr.Body = &aw.body
	pr.ContentLength = aw.body.set(rt.body, splices[:n]...)
	pr.Header.Set("Content-Length", strconv.FormatInt(pr.ContentLength, 10))

	if vg := t.group.vllm; vg != nil {
		// the selection policy reads the group and model from here, and
		// leaves the in-flight slot it reserved
		aw.slot = attemptSlot{group: vg, model: t.Model, avoid: avoid}
		caddyhttp.SetVar(actx, varAttempt, &aw.slot)
		defer func() {
			aw.slot.release()
			caddyhttp.SetVar(actx, varAttempt, nil)
		}()
	}
	if t.FirstByteTimeout > 0 && rt.stream {
		// a stream that sends nothing in time is abandoned for the next
		// target, before anything reached the client
		aw.holdUntilBody = true
		timer := time.AfterFunc(time.Duration(t.FirstByteTimeout), func() {
			if aw.state.CompareAndSwap(attemptPending, attemptAbandoned) {
				cancel()
			}
		})
		defer timer.Stop()
	}
	t.group.inflight.Add(1)
	aborted, err := proxy(t.group.proxy, aw, pr)
	t.group.inflight.Add(-1)
	// from here the timer may still fire (Stop does not wait for it): an
	// answer that is not committed yet must win the state before it is sent
	ep = aw.slot.ep

	// the breakers' verdict on this attempt, settled however it ends (a
	// mid-stream failure ends in a panic): the endpoint's, and the
	// group's when this attempt carries its half-open trial
	verdict = verdictNone
	defer func() {
		if bc := t.group.Breaker; bc != nil {
			if ep != nil {
				rt.judge(ep.br, bc, verdict, aw.slot.trial, t.Group, ep.dial)
			}
			if groupTrial || verdict != verdictNone {
				rt.judge(&t.group.shared.breaker, bc, verdict, groupTrial, t.Group, "")
			}
		}
	}()
	clientGone := rt.r.Context().Err() != nil || aw.status == statusClientClosed

	contextErr := false
	if aw.held != nil && !aborted && err == nil {
		// a held 400, read whole: the next target gets the request only
		// for a context-length error; any other 400 is the answer, unless
		// the first-byte timer abandoned the attempt first (a 400 cut
		// short is no answer: the attempt failed)
		contextErr = isContextError(aw.held.Bytes())
		if !contextErr && aw.commit(aw.status) {
			_, _ = aw.w.Write(aw.held.Bytes())
			verdict = verdictSuccess // the client's business, not the upstream's
			return true, nil, ep, verdict
		}
	}
	if aw.state.Load() == attemptCommitted {
		if aw.scan != nil {
			aw.scan.finish(forwarder{aw})
		}
		switch {
		case clientGone:
		case aborted:
			verdict = verdictFailure // the upstream broke off
		default:
			verdict = verdictSuccess
		}
		if aborted {
			rt.outcome = outcomeInterrupted
			rt.midStreamFailure(actx, aw)
		}
		return true, err, ep, verdict
	}

	// the attempt failed before its first byte: record why, discard
	// whatever it buffered, and let the next target have the request
	a := attempt{target: t, status: aw.status}
	switch {
	case contextErr:
		a.reason = reasonContextLength
	case aw.status != 0 && aw.held == nil:
		// the upstream's own status, even if the timer fired after it
		a.reason = "http_" + strconv.Itoa(aw.status)
	case aw.state.Load() == attemptAbandoned:
		a.reason = reasonFirstByte
	case ctx.Err() != nil:
		a.reason = reasonDeadline
	case actx.Err() != nil:
		a.reason = reasonTimeout
	case aborted:
		a.reason = reasonConnReset // the upstream broke off a held answer
	default:
		a.reason = classify(err)
		if a.reason == reasonNoEndpoint && aw.slot.skip != "" {
			a.reason = aw.slot.skip // the policy knows better why
		}
	}
	rt.attempts = append(rt.attempts, a)
	if c := rt.g.logger.Check(zapcore.DebugLevel, "attempt failed"); c != nil {
		c.Write(zap.String("request_id", rt.id), zap.String("group", t.Group),
			zap.String("model", t.Model), zap.String("reason", a.reason), zap.Error(err))
	}
	verdict = t.group.verdict(a.reason, false, rt.r.Context())
	if clientGone {
		verdict = verdictNone
	}
	return false, nil, ep, verdict
}

// proxy runs the group's reverse proxy, turning its abort of a started
// response (a panic with http.ErrAbortHandler) into a flag.
func proxy(h *reverseproxy.Handler, w http.ResponseWriter, r *http.Request) (aborted bool, err error) {
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

// midStreamFailure ends a response whose upstream failed after the first
// byte. An SSE stream gets an error event, so the client never mistakes
// the cut for a clean end; anything else is aborted.
func (rt *route) midStreamFailure(ctx context.Context, aw *attemptWriter) {
	if rt.r.Context().Err() != nil || !aw.sse {
		panic(http.ErrAbortHandler)
	}
	msg := "the upstream connection failed mid-stream"
	if ctx.Err() != nil {
		msg = "the upstream did not finish in time"
	}
	// the cut may have come inside an event: end it first, so that the
	// error is an event of its own rather than glued onto a partial one
	switch {
	case aw.tail == [2]byte{} || aw.tail == [2]byte{'\n', '\n'}:
	case aw.tail[1] == '\n':
		_, _ = io.WriteString(rt.w, "\n")
	default:
		_, _ = io.WriteString(rt.w, "\n\n")
	}
	_, _ = rt.w.Write(sseErrorEvent("stream_interrupted", msg))
	_ = http.NewResponseController(rt.w).Flush()
	rt.g.logger.Warn("stream interrupted after the first byte",
		zap.String("request_id", rt.id),
		zap.String("group", aw.target.Group),
		zap.String("model", aw.target.Model))
}

// classify names why a proxy attempt failed without a response.
func classify(err error) string {
	if err == nil {
		return reasonUpstream
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode == http.StatusServiceUnavailable &&
		he.Err != nil && he.Err.Error() == "no upstreams available" {
		return reasonNoEndpoint
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return reasonConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		// net.ErrClosed: the transport closed the connection under the
		// request body it was writing, having seen the reset
		return reasonConnReset
	}
	// some transport errors carry their cause only in their text
	switch msg := err.Error(); {
	case strings.Contains(msg, "connection reset"), strings.Contains(msg, "broken pipe"),
		strings.Contains(msg, "server closed"), strings.HasSuffix(msg, ": EOF"):
		return reasonConnReset
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return reasonTimeout
	}
	var de reverseproxy.DialError
	if errors.As(err, &de) {
		// DialError does not unwrap, so its cause is only in its text
		if strings.Contains(de.Error(), "connection refused") {
			return reasonConnRefused
		}
		return reasonDial
	}
	return reasonUpstream
}

// fail answers a request none of whose targets answered.
func (rt *route) fail(al *Alias) error {
	status := http.StatusServiceUnavailable
	code := "no_target_available"
	timedOut := false
	for _, a := range rt.attempts {
		switch a.reason {
		case reasonNoEndpoint, reasonRedLine, reasonUnhealthy, reasonMisconfig, reasonStaleMetrics,
			reasonOverflow, reasonBreakerOpen, reasonContextWindow, reasonDrained:
		case reasonDeadline:
			timedOut = true
		default:
			status, code = http.StatusBadGateway, "all_targets_failed"
		}
	}
	if timedOut && status == http.StatusServiceUnavailable {
		status, code = http.StatusGatewayTimeout, "deadline_exceeded"
	}
	rt.status = status
	if status == http.StatusBadGateway {
		rt.outcome = outcomeUpstream
	} else {
		rt.outcome = outcomeUnavailable
	}
	var sb strings.Builder
	sb.WriteString("no target could serve model `")
	sb.WriteString(al.name)
	sb.WriteString("`; tried: ")
	for i, a := range rt.attempts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a.target.Group)
		sb.WriteString(" (")
		sb.WriteString(a.reason)
		sb.WriteString(")")
	}
	return writeError(rt.w, status, errTypeServer, code, "", sb.String())
}

// MarshalLogObject writes the routing record into the access log entry,
// as top-level llm_* fields (the route is added with zap.Inline). It runs
// only when an entry is written: the access log's, after the handler
// returned, so a request costs nothing here when access logs are off (a
// module logging through slog with the request's context in the middle
// of it gets the record so far).
func (rt *route) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", rt.id)
	if rt.alias == nil {
		return nil // refused before routing
	}
	enc.AddString("llm_alias", rt.alias.name)
	enc.AddBool("llm_stream", rt.stream)
	if t := rt.answered; t != nil {
		enc.AddString("llm_group", t.Group)
		enc.AddString("llm_model", t.Model)
		if repl, ok := rt.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
			// the committed attempt was the proxy's last
			if ep, ok := repl.GetString("http.reverse_proxy.upstream.hostport"); ok && ep != "" {
				enc.AddString("llm_endpoint", ep)
			}
		}
	}
	_ = enc.AddArray("llm_tried", zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
		for _, a := range rt.attempts {
			ae.AppendString(a.target.Group + ":" + a.reason)
		}
		return nil
	}))
	n := len(rt.attempts)
	if rt.ttfb > 0 {
		n++
		enc.AddDuration("llm_ttfb", rt.ttfb)
	}
	enc.AddInt("llm_attempts", n)
	enc.AddBool("llm_fallback", len(rt.attempts) > 0 && rt.ttfb > 0)
	if len(rt.attempts) > 0 {
		enc.AddString("llm_fallback_reason", rt.attempts[len(rt.attempts)-1].reason)
	}
	enc.AddBool("llm_overflow", rt.overflow != "")
	if rt.overflow != "" {
		enc.AddString("llm_overflow_reason", rt.overflow)
	}
	if rt.rule != "" {
		enc.AddString("llm_route", rt.rule)
	}
	if rt.usage.found {
		enc.AddInt64("llm_prompt_tokens", rt.usage.prompt)
		enc.AddInt64("llm_completion_tokens", rt.usage.completion)
	}
	if rt.priced {
		enc.AddFloat64("llm_cost_usd", rt.costUSD)
	}
	return nil
}

// finish settles the request's outcome and records its metrics.
func (rt *route) finish() {
	group := ""
	if rt.answered != nil {
		group = rt.answered.Group
	}
	switch {
	case rt.outcome != "":
	case rt.r.Context().Err() != nil && rt.answered == nil:
		rt.outcome = outcomeCanceled
	case rt.status >= 500:
		rt.outcome = outcomeUpstream
	case rt.status >= 400:
		rt.outcome = outcomeClientError
	default:
		rt.outcome = outcomeOK
	}
	rt.meter(rt.alias, group, rt.status, rt.outcome)
	rt.cost()
}

// cost prices the request on the side that served it: a cloud's tokens
// or seconds at its prices, self-hosted tokens at the recent fixed cost
// per token; it goes into the ledger, the cloud spend and the log.
func (rt *route) cost() {
	t := rt.answered
	if t == nil || rt.g.ledger == nil {
		return
	}
	cc := t.group.Cost
	usd, cloudUSD := 0.0, 0.0
	switch {
	case cc == nil:
	case t.group.Kind == KindOpenAI:
		usd = cc.requestCost(rt.usage.prompt, rt.usage.completion, time.Since(rt.start))
		cloudUSD = usd
		costTotal.WithLabelValues(rt.g.Name, t.Group).Add(usd)
	default:
		usd = float64(rt.usage.prompt+rt.usage.completion) * rt.g.selfCostPerToken()
	}
	rt.g.ledger.addRequest(now(), t.group.Kind == KindVLLM, rt.usage.prompt, rt.usage.completion, cloudUSD)
	rt.costUSD, rt.priced = usd, cc != nil
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
		sb.WriteString(a.reason)
	}
	return sb.String()
}

// attemptWriter stands between one attempt's reverse proxy and the
// client. Each attempt gets its own header map, so nothing a failed
// attempt set reaches the client. A fallback status (429, 5xx) is held
// back and its body discarded; a 400 is held with its body while a next
// target could take a context-length error; anything else commits the
// response: the headers go to the client and every write after that
// passes straight through, flushed whenever the proxy flushes. With a
// first-byte timeout a stream commits on its first body byte instead, so
// that the timer can still abandon it for the next target.
type attemptWriter struct {
	w      http.ResponseWriter
	rt     *route
	target *Target
	header http.Header
	status int
	state  atomic.Int32
	sse    bool
	tail   [2]byte // the last bytes of an event stream written so far
	slot   attemptSlot
	scan   *usageScanner // reads the usage from the response on its way
	body   upstreamBody  // the request body this attempt sends

	holdBadRequest bool          // hold a 400 to look for a context-length error
	held           *bytes.Buffer // the held 400's body
	holdUntilBody  bool          // commit on the first body byte, not the header
	heldStatus     int
}

// Attempt states; the first-byte timer races the proxy for the change
// from pending.
const (
	attemptPending int32 = iota
	attemptCommitted
	attemptAbandoned
)

func (aw *attemptWriter) Header() http.Header {
	if aw.header == nil {
		aw.header = make(http.Header)
	}
	return aw.header
}

func (aw *attemptWriter) WriteHeader(status int) {
	if aw.status != 0 || aw.heldStatus != 0 || aw.state.Load() != attemptPending {
		return
	}
	switch {
	case status < 200:
		// informational responses are not passed on
	case fallbackStatus(status) || status == statusClientClosed:
		aw.status = status
	case status == http.StatusBadRequest && aw.holdBadRequest:
		aw.status = status
		aw.held = new(bytes.Buffer)
	case aw.holdUntilBody:
		aw.heldStatus = status
	default:
		aw.commit(status)
	}
}

// commit sends the response head to the client. It loses to an abandoned
// attempt.
func (aw *attemptWriter) commit(status int) bool {
	if !aw.state.CompareAndSwap(attemptPending, attemptCommitted) {
		return false
	}
	rt := aw.rt
	rt.ttfb = time.Since(rt.start)
	h := aw.w.Header() // ServeHTTP set the request id there
	var upstreamID []string
	for k, v := range aw.header {
		if k == "X-Request-Id" {
			upstreamID = v
			continue
		}
		h[k] = v
	}
	// the gateway's request id is the one the client sees; an upstream's
	// own id (a cloud's, say) goes under another name
	if len(upstreamID) > 0 && upstreamID[0] != "" && upstreamID[0] != rt.id {
		h["X-Upstream-Request-Id"] = upstreamID[:1:1]
	}
	// an error event can only be appended to a plain (not compressed)
	// event stream
	ct := h.Get("Content-Type")
	plain := h.Get("Content-Encoding") == ""
	aw.sse = strings.HasPrefix(ct, "text/event-stream") && plain
	switch {
	case aw.sse:
		rt.usage = usageScanner{sse: true, strip: rt.injected}
		aw.scan = &rt.usage
		if rt.injected {
			// events may be shortened
			h.Del("Content-Length")
		}
	case plain && strings.HasPrefix(ct, "application/json"):
		rt.usage = usageScanner{}
		aw.scan = &rt.usage
	}
	rt.status = status
	t := aw.target
	rt.answered = t
	if !rt.g.DisableRouteHeaders {
		// canonical keys, assigned directly, their values in one array
		v := make([]string, 2, 4)
		v[0], v[1] = t.Group, t.Model
		h["X-Hybrid-Target"], h["X-Hybrid-Model"] = v[0:1:1], v[1:2:2]
		if len(rt.attempts) > 0 {
			v = append(v, "true", rt.fallbackReasons())
			h["X-Hybrid-Fallback"], h["X-Hybrid-Fallback-Reason"] = v[2:3:3], v[3:4:4]
		}
		if rt.overflow != "" {
			h.Set("X-Hybrid-Overflow", rt.overflow)
		}
		if rt.rule != "" {
			h.Set("X-Hybrid-Route", rt.rule)
		}
	}
	// from now on the proxy writes straight into the client's header
	// map, so that trailers it sets after the body reach the client
	aw.header = h
	aw.w.WriteHeader(status)
	return true
}

func (aw *attemptWriter) Write(p []byte) (int, error) {
	switch aw.state.Load() {
	case attemptAbandoned:
		return 0, errAbandoned
	case attemptPending:
		switch {
		case aw.held != nil:
			if aw.held.Len()+len(p) <= maxHeldBody {
				return aw.held.Write(p)
			}
			// too long for a context-length error: the 400 is the
			// answer, and goes to the client whole
			held := aw.held.Bytes()
			aw.held, aw.heldStatus, aw.status = nil, aw.status, 0
			if _, err := aw.Write(held); err != nil {
				return 0, err
			}
			return aw.Write(p)
		case aw.status != 0:
			return len(p), nil // a failed attempt's body: discarded
		case len(p) == 0:
			return 0, nil
		}
		status := aw.heldStatus
		if status == 0 {
			status = http.StatusOK
		}
		if !aw.commit(status) {
			return 0, errAbandoned
		}
	}
	if aw.scan != nil {
		if _, err := aw.scan.write(forwarder{aw}, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return aw.forward(p)
}

// forward writes to the client, remembering the tail of an event stream.
func (aw *attemptWriter) forward(p []byte) (int, error) {
	n, err := aw.w.Write(p)
	if aw.sse && n > 0 {
		if n == 1 {
			aw.tail = [2]byte{aw.tail[1], p[0]}
		} else {
			aw.tail = [2]byte{p[n-2], p[n-1]}
		}
	}
	return n, err
}

// forwarder is an attemptWriter's way to the client, for the usage scanner.
type forwarder struct{ aw *attemptWriter }

func (f forwarder) Write(p []byte) (int, error) { return f.aw.forward(p) }

// maxHeldBody caps a held 400 body; error bodies are small.
const maxHeldBody = 64 << 10

// errAbandoned is what an abandoned attempt's proxy gets for its writes.
var errAbandoned = errors.New("attempt abandoned")

// FlushError flushes a committed response to the client.
func (aw *attemptWriter) FlushError() error {
	if aw.state.Load() != attemptCommitted {
		return nil
	}
	return http.NewResponseController(aw.w).Flush()
}

// Flush implements http.Flusher.
func (aw *attemptWriter) Flush() { _ = aw.FlushError() }

// Unwrap lets http.ResponseController reach the client's writer.
func (aw *attemptWriter) Unwrap() http.ResponseWriter { return aw.w }

// Interface guards
var (
	_ http.ResponseWriter = (*attemptWriter)(nil)
	_ http.Flusher        = (*attemptWriter)(nil)
)
