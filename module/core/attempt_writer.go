// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// headerMaps keeps the attempts' own header maps for reuse: a map is
// emptied once its entries have moved to the client's at the commit.
var headerMaps = sync.Pool{New: func() any { return make(http.Header, 8) }}

// attemptWriter stands between one attempt's reverse proxy and the
// client. Each attempt gets its own header map, so nothing a failed
// attempt set reaches the client. A fallback status (the target's
// fallback_on) is held back and its body discarded, but for the start of
// a 404's, which tells a missing model from another 404; a 400 is held
// with its body while a next target could take a context-length error;
// anything else commits the response: the headers go to the client and
// every write after that passes straight through, flushed whenever the
// proxy flushes. With a first-byte timeout a stream commits on its first
// body byte instead, so that the timer can still abandon it for the next
// target.
type attemptWriter struct {
	w      http.ResponseWriter
	rt     *Route
	target *routing.Target
	api    *protocol.API // the API the attempt speaks to its upstream
	header http.Header
	status int
	state  atomic.Int32
	slot   upstream.Slot         // for the selection policy, on a vLLM group
	body   upstreamBody          // the request body this attempt sends
	began  time.Time             // the attempt's start
	rec    routing.AttemptRecord // what the attempt's observers see of it
	hold   answerHold            // what it holds back of the answer
	out    answerOut             // how the answer is passed on
	guard  answerGuard           // the answer's watch
}

// answerHold is what an attempt holds back of its answer, and why.
type answerHold struct {
	badRequest bool          // hold a 400 to look for a context-length error
	untilBody  bool          // commit on the first body byte, not the header
	body       *bytes.Buffer // the held 4xx's body
	status     int           // the status held for the first body byte
	notFound   []byte        // the start of a held 404's body
	notAPI     bool          // the answer is an HTML page, not the API's
}

// answerOut is how an answer is passed on to the client.
type answerOut struct {
	sse   bool
	tail  [2]byte                 // the last bytes of an event stream written so far
	scan  *protocol.UsageScanner  // reads the usage from the response on its way
	model *protocol.ModelRewriter // puts the alias into the answer's model, if set
	conv  converter               // turns a translated answer into the client's API, if set
	mark  []byte                  // a degraded answer's mark, until it is written
	held  *bytes.Buffer           // a JSON answer held for its length (see release)
	lost  bool                    // a write to the client failed
	sniff bool                    // its start is read for its response id (see readResponseID)
}

// answerGuard is an answer's watch (see watchdog): the attempt's cancel,
// which cuts it short, the reason it was cut, and its body writes,
// counted twice each (odd while one is under way).
type answerGuard struct {
	cancel context.CancelFunc
	cut    atomic.Int32
	reads  atomic.Uint32
	dog    *watchdog
}

// Attempt states; the time limits race the proxy for the change from
// pending. Once an attempt is abandoned or expired, nothing its proxy
// writes counts: Caddy's proxy answers the canceled request with a 499 of
// its own, which is nobody's answer.
const (
	attemptPending int32 = iota
	attemptCommitted
	attemptAbandoned // the first-byte timeout passed
	attemptExpired   // the target's timeout passed before the commit
)

func (aw *attemptWriter) HeldSlot() *upstream.Slot { return &aw.slot }

func (aw *attemptWriter) Header() http.Header {
	if aw.header == nil {
		aw.header = headerMaps.Get().(http.Header)
	}
	return aw.header
}

func (aw *attemptWriter) WriteHeader(status int) {
	if aw.status != 0 || aw.hold.status != 0 || aw.state.Load() != attemptPending {
		return
	}
	switch {
	case status < 200:
		// informational responses are not passed on
	case aw.target.FallsBackOn(status) || status == statusClientClosed:
		aw.status = status
	case status < 300 && isHTML(aw.header["Content-Type"]):
		// no API answers with a page: the group's address is wrong
		aw.status, aw.hold.notAPI = status, true
	case status >= 400 && status < 500:
		// held whole: a context-length 400 goes to the next target, and
		// so does a 404 that says the model does not exist (the gateway
		// chose that name); any other is the answer, put in the API's
		// error shape (see protocol.ErrorShape)
		aw.status = status
		aw.hold.body = new(bytes.Buffer)
	case aw.hold.untilBody:
		aw.hold.status = status
	default:
		if aw.commit(status) {
			aw.watch()
		}
	}
}

// commit sends the response head to the client. It loses to an abandoned
// attempt.
func (aw *attemptWriter) commit(status int) bool {
	if !aw.state.CompareAndSwap(attemptPending, attemptCommitted) {
		return false
	}
	rt := aw.rt
	rt.x.ans.ttfb = time.Since(rt.x.start)
	h := aw.w.Header() // ServeHTTP set the request id there
	aw.passHeaders(h)
	aw.readAnswer(status, h)
	rt.x.ans.status = status
	t := aw.target
	rt.x.ans.target, rt.x.ans.began, rt.x.ans.via.affine = t, aw.began, aw.slot.ByAffinity
	if rt.q.API == protocol.Responses && status < 300 && aw.out.scan != nil {
		aw.out.sniff = true
		rt.x.stored = new(storedResponse)
		if t.Upstream.VLLM != nil {
			// the upstream the proxy picked, whatever its policy
			rt.x.stored.endpoint = upstreamHostport(rt.r)
		}
	}
	if aw.api != rt.q.API {
		rt.x.ans.via.translated = true
		if rt.f.RouteHeadersOn {
			h["X-Hybrid-Translated"] = []string{aw.api.Endpoint}
		}
	}
	if t.Tier != nil {
		markDegraded(rt.x.deg, &rt.x, rt.f.Name, aw, h)
	}
	if rt.f.RouteHeadersOn {
		rt.setRouteHeaders(h, t)
	}
	// from now on the proxy writes straight into the client's header
	// map, so that trailers it sets after the body reach the client; the
	// attempt's own map is no longer read (the proxy asks for Header()
	// again after WriteHeader)
	if own := aw.header; own != nil {
		clear(own)
		headerMaps.Put(own)
	}
	aw.header = h
	if aw.out.scan != nil && !aw.out.sse && len(h["Content-Length"]) == 0 && len(h["Trailer"]) == 0 {
		// a JSON answer whose length changes on its way (the model's
		// name, a degraded answer's mark): its head waits for its end,
		// or for the proxy's first flush (see release)
		aw.out.held = heldAnswers.Get().(*bytes.Buffer)
		return true
	}
	aw.w.WriteHeader(status)
	return true
}

// heldAnswers keeps the buffers of JSON answers held for their length.
var heldAnswers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxHeldAnswer caps a JSON answer held for its length: a longer one goes
// out as it comes, without one.
const maxHeldAnswer = 64 << 10

// toClient writes p of a committed answer's body to the client, or holds
// it while the answer is held for its length.
func (aw *attemptWriter) toClient(p []byte) (int, error) {
	if b := aw.out.held; b != nil {
		if b.Len()+len(p) <= maxHeldAnswer {
			return b.Write(p)
		}
		aw.release(false)
	}
	return aw.w.Write(p)
}

// release sends a held answer's head, with the body's length if it is
// whole, and the body held so far. A JSON answer gets its Content-Length
// (net/http sets one only for a short body it holds until the handler
// returns, and the flush before a journaled charge would make it
// chunked), and goes out in one write. A whole body's last byte waits for
// the request's end (see Route.finish): a client has its answer only once
// it is metered and charged, as with a chunked answer's last chunk.
func (aw *attemptWriter) release(whole bool) {
	b := aw.out.held
	if b == nil {
		return
	}
	aw.out.held = nil
	body := b.Bytes()
	if whole {
		aw.w.Header()["Content-Length"] = []string{strconv.Itoa(len(body))}
		if n := len(body); n > 0 {
			aw.rt.x.ans.held = [2]byte{body[n-1], 1}
			body = body[:n-1]
		}
	}
	aw.w.WriteHeader(aw.rt.x.ans.status)
	if len(body) > 0 {
		if _, err := aw.w.Write(body); err != nil {
			aw.out.lost = true // as in forward
		}
	}
	if b.Cap() <= maxHeldAnswer {
		b.Reset()
		heldAnswers.Put(b)
	}
}

// passHeaders copies the upstream's answer headers the client may see
// into h.
func (aw *attemptWriter) passHeaders(h http.Header) {
	rt := aw.rt
	var upstreamID []string
	pass := rt.f.Pass
	for k, v := range aw.header {
		if k == "X-Request-Id" {
			upstreamID = v
			continue
		}
		if upstreamOnly(k) && !pass.passes(k) {
			continue
		}
		h[k] = v
	}
	// the gateway's request id is the one the client sees; an upstream's
	// own id (a cloud's, say) goes under another name
	if len(upstreamID) > 0 && upstreamID[0] != "" && upstreamID[0] != rt.x.id {
		h["X-Upstream-Request-Id"] = upstreamID[:1:1]
	}
}

// readAnswer sets up what reads the answer on its way to the client (its
// usage, its end, the alias in its model) from its headers h.
func (aw *attemptWriter) readAnswer(status int, h http.Header) {
	rt := aw.rt
	// an error event can only be appended to a plain (not compressed)
	// event stream
	ct := h.Get("Content-Type")
	plain := h.Get("Content-Encoding") == ""
	aw.out.sse = strings.HasPrefix(ct, "text/event-stream") && plain
	alias := rt.x.alias.ModelJSON // set when answers carry the alias
	api := aw.api
	switch {
	case aw.out.sse:
		// a (chat) completion stream ends with a finish_reason, and it is
		// passed on whole events at a time, so that an end before it is
		// the gateway's to tell
		wantFinish := status < 300 && api.StreamEnds
		rt.x.usage = protocol.UsageScanner{SSE: true, Events: api.Events, Strip: rt.inj.injected,
			Whole: alias != nil || wantFinish, WantFinish: wantFinish}
		aw.out.scan = &rt.x.usage
	case plain && strings.HasPrefix(ct, "application/json"):
		rt.x.usage = protocol.UsageScanner{Events: api.Events}
		aw.out.scan = &rt.x.usage
	}
	switch {
	case aw.out.scan == nil:
	case api != rt.q.API && status < 300:
		// a translated answer: the client's API, with the alias (or the
		// served name, where answers carry it) as its model
		if alias == nil {
			alias = aw.target.Run.ModelJSON
		}
		aw.out.conv = converterFor(aw.out.sse, alias)
	case alias != nil:
		rt.model = protocol.ModelRewriter{Alias: alias, SSE: aw.out.sse, Events: api.Events}
		aw.out.model = &rt.model
	}
	if (aw.out.sse && rt.inj.injected) || aw.out.model != nil || aw.out.conv != nil {
		// events may be shortened, the model's name changes length
		h.Del("Content-Length")
	}
}

func (aw *attemptWriter) Write(p []byte) (int, error) {
	switch aw.state.Load() {
	case attemptAbandoned, attemptExpired:
		return 0, errAbandoned
	case attemptPending:
		switch {
		case aw.hold.body != nil:
			if aw.hold.body.Len()+len(p) <= maxHeldBody {
				return aw.hold.body.Write(p)
			}
			// too long for a context-length error or a missing model:
			// the 4xx is the answer, and goes to the client whole, as
			// it came
			held := aw.hold.body.Bytes()
			aw.hold.body, aw.hold.status, aw.status = nil, aw.status, 0
			if _, err := aw.Write(held); err != nil {
				return 0, err
			}
			return aw.Write(p)
		case aw.status != 0:
			// a failed attempt's body: discarded, but for what tells a
			// missing model
			if aw.status == http.StatusNotFound && len(aw.hold.notFound) < maxNotFoundBody {
				aw.hold.notFound = append(aw.hold.notFound, p[:min(len(p), maxNotFoundBody-len(aw.hold.notFound))]...)
			}
			return len(p), nil
		case len(p) == 0:
			return 0, nil
		}
		status := aw.hold.status
		if status == 0 {
			status = http.StatusOK
		}
		if !aw.commit(status) {
			return 0, errAbandoned
		}
		aw.watch()
	}
	aw.guard.reads.Add(1) // odd: a write under way, which the watchdog waits for
	n, err := aw.pass(p)
	aw.guard.reads.Add(1)
	return n, err
}

// pass writes a committed answer's body on its way to the client.
func (aw *attemptWriter) pass(p []byte) (int, error) {
	if aw.out.sniff {
		readResponseID(aw, p)
	}
	if aw.out.scan != nil {
		if _, err := aw.out.scan.Pass(forwarder{aw}, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return aw.forward(p)
}

// forward writes to the client, remembering the tail of an event stream.
func (aw *attemptWriter) forward(p []byte) (int, error) {
	write := aw.toClient
	if aw.out.mark != nil {
		write = aw.markBody
	}
	n, err := write(p)
	aw.rt.x.ans.sent += int64(n)
	if err != nil {
		// the client's connection failed: the client left, whether or
		// not its request's context has been canceled yet
		aw.out.lost = true
	}
	if aw.out.sse && n > 0 {
		if n == 1 {
			aw.out.tail = [2]byte{aw.out.tail[1], p[0]}
		} else {
			aw.out.tail = [2]byte{p[n-2], p[n-1]}
		}
	}
	return n, err
}

// forwarder is an attemptWriter's way to the client for the usage
// scanner: through the translation or the model rewrite, if any.
type forwarder struct{ aw *attemptWriter }

func (f forwarder) Write(p []byte) (int, error) {
	if f.aw.out.conv != nil {
		return f.aw.out.conv.Pass(toClient{f.aw}, p)
	}
	if f.aw.out.model != nil {
		return f.aw.out.model.Pass(toClient{f.aw}, p)
	}
	return f.aw.forward(p)
}

// toClient is an attemptWriter's direct way to the client.
type toClient struct{ aw *attemptWriter }

func (c toClient) Write(p []byte) (int, error) { return c.aw.forward(p) }

// finishBody writes what the usage scanner and the model rewrite still
// hold at the end of the body.
func (aw *attemptWriter) finishBody(aborted bool) {
	aw.out.scan.Finish(forwarder{aw}, aborted)
	if aw.out.conv != nil && !aborted {
		_ = aw.out.conv.Finish(toClient{aw})
	}
	if aw.out.model != nil {
		aw.out.model.Finish(toClient{aw})
	}
}

// isHTML reports whether a Content-Type says HTML.
func isHTML(ct []string) bool {
	return len(ct) > 0 && strings.HasPrefix(ct[0], "text/html")
}

// maxHeldBody caps a held 4xx body; error bodies are small.
const maxHeldBody = 64 << 10

// maxNotFoundBody caps what is kept of a held 404's body.
const maxNotFoundBody = 4 << 10

// errAbandoned is what an abandoned attempt's proxy gets for its writes.
var errAbandoned = errors.New("attempt abandoned")

// FlushError flushes a committed response to the client.
func (aw *attemptWriter) FlushError() error {
	if aw.state.Load() != attemptCommitted {
		return nil
	}
	// the proxy flushes an answer that comes without a length as it
	// comes (a cloud's, decompressed): it is not held
	aw.release(false)
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

// firstByteLimit starts the limit that abandons a stream which sends
// nothing in time for the next target, before anything reached the
// client; nil when the target has no first_byte_timeout or the request
// does not stream.
func (aw *attemptWriter) firstByteLimit() *limitTimer {
	if aw.target.Run.FirstByte <= 0 || !aw.rt.q.Stream {
		return nil
	}
	aw.hold.untilBody = true
	return startLimit(firstByteLimits, aw, aw.target.Run.FirstByte)
}
