// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"net/http"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// exchange is the record of one request's exchange with the gateway: who
// asked, what was tried, what answered and what it cost. The route fills
// it in; what watches requests (the metrics, the access log, the trace,
// the books) reads it, as the request ends (see Route.finish) or, for
// the access log, once the handler has returned.
type exchange struct {
	id       string          // the gateway's request id
	clientID string          // the client's own X-Request-Id, if it sent one
	client   *clients.Caller // who sent it, when clients are configured
	alias    *routing.Alias  // nil while the request is refused before routing
	r        *http.Request
	start    time.Time
	q        *routing.Asked // what it asks
	attempts []routing.Attempt
	rule     string                 // the group a pre-routing rule sent the request to
	color    *routing.Color         // the color the request asked for, if it counts
	deg      *routing.DegradeRecord // with a degradation chain
	usage    protocol.UsageScanner
	span     requestSpan
	ans      answer
	stored   *storedResponse // a Responses API answer's response, if any
}

// answer is how a request was answered, and what it was charged.
type answer struct {
	target *routing.Target // the target whose response the client got
	// when the answering attempt started: a cloud priced per second
	// bills its attempt, not the time failed attempts took before it
	began time.Time
	ttfb  time.Duration // to the answer's first byte, from the request's start
	// the status the client got, and the outcome it counts as
	status  int
	outcome string
	// why an answer broke off after its first byte (outcome interrupted)
	interruption string
	sent         int64 // the answer's body bytes passed on to the client
	// the target whose attempt the client left before any answer, and
	// when that attempt began: the request is charged there
	abandoned   *routing.Target
	abandonedAt time.Time
	// no usage came with the answer: its tokens are the gateway's
	// estimate (see estimateUsage)
	estimated bool
	costUSD   float64   // what the answer cost, if priced
	priced    bool      // costUSD is set
	overflow  string    // group:signal of the overflow it left a target for, as it ended
	via       answerVia // how the answering target was reached
	// a held answer's last byte and whether it is still to be written
	// (see attemptWriter.release)
	held [2]byte
	// the request's priority class, where a group has classes
	class priority.Class
}

// answerVia is how a request reached the target that answered it.
type answerVia struct {
	// translated for it (into chat completions)
	translated bool
	// to its vLLM endpoint as the conversation's (prefix affinity), not
	// as the least loaded
	affine bool
	// after waiting in a group's queue (a sheddable request)
	queued bool
}

// requestSpan is the request's span, looked up once (see traced).
type requestSpan struct {
	span trace.Span // nil when the request is not recorded
	read bool
}

// charged is the target a request is charged to: the one that answered,
// or the one the client left (see estimateAbandoned).
func (x *exchange) charged() (*routing.Target, time.Time) {
	if x.ans.target != nil {
		return x.ans.target, x.ans.began
	}
	if x.ans.estimated {
		return x.ans.abandoned, x.ans.abandonedAt
	}
	return nil, time.Time{}
}

// clientName is the request's client as metrics and the spend book know
// it: empty without clients, and for a name only an identity gave (which
// no config bounds).
func (x *exchange) clientName() string {
	if x.client == nil || !x.client.Known {
		return ""
	}
	return x.client.Name
}

// clientIDField is the client's own request id, for the gateway's log
// records, or nothing.
func (x *exchange) clientIDField() zap.Field {
	if x.clientID == "" {
		return zap.Skip()
	}
	return zap.String("llm_client_request_id", x.clientID)
}

// traced is the request's span when it is being recorded, else nil. It is
// looked up once: a lookup walks the whole context chain when there is
// no span.
func (x *exchange) traced() trace.Span {
	if !x.span.read {
		if s := trace.SpanFromContext(x.r.Context()); s.IsRecording() {
			x.span.span = s
		}
		x.span.read = true
	}
	return x.span.span
}
