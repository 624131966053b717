// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"net/http"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.opentelemetry.io/otel/trace"
)

// An attemptObserver sees each attempt on a target begin and end: what
// counts attempts (the ledger's GPU occupancy, health scores and
// latencies, traces, configuration faults, breakers) does it here, never
// in the attempt's own code. A target holds the observers its config
// calls for (see targetKit.observersOf); their ends run in the reverse
// order of their begins, however the attempt ends (a stream broken off
// after its first byte ends in a panic).
type attemptObserver interface {
	// attemptBegan is called as the attempt starts. ctx is the
	// attempt's; the one it returns is the attempt's from then on (the
	// attempt's span).
	attemptBegan(ctx context.Context, a *attemptRecord) context.Context
	// attemptEnded is called once the attempt is judged.
	attemptEnded(a *attemptRecord)
}

// attemptRecord is what an attempt's observers see of it: set as it
// begins, completed as it ends, and where they keep what they need of
// it in between.
type attemptRecord struct {
	target *Target
	turn   attemptTurn // its place in the plan
	n      int         // its number in the request, from 1
	began  time.Time
	req    *attemptAsk

	span trace.Span // its span, if the request is traced

	// as it ends
	res    attemptResult
	status int      // the upstream's, if held or a fallback status (0: none, or the answer's)
	failed *attempt // why it failed before its first byte, if it did
	// the time to its answer's first byte, if it answered a stream (0:
	// the whole attempt is its latency)
	firstByte time.Duration
	slot      *upstream.Slot // the selection policy's handle, in a vLLM group
}

// attemptAsk is what an attempt's observers see of its request.
type attemptAsk struct {
	alias  string
	api    *protocol.API
	stream bool
	r      *http.Request // the client's: its replacer names the upstream an attempt went to
	parent trace.Span    // the request's span, if it is traced
	usage  *protocol.UsageScanner
}

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

// attemptResult is how one attempt ended.
type attemptResult struct {
	// the response has started (the client got bytes, successful or
	// not): no other target may be tried
	done    bool
	ep      *upstream.Endpoint // the vLLM endpoint it went to, if known
	verdict verdict            // what it says about the upstream
	cause   breaker.Cause      // of a failure, for the endpoint's breaker
	// the endpoint, or the cloud group, answered 429 with Retry-After
	// and is held out
	held bool
	gone bool // the client left before the first byte
	// the request could not be written on a pooled connection the
	// upstream had closed: it goes again, once, on a new one
	stale bool
}

// attemptTurn is an attempt's place in the request's plan.
type attemptTurn struct {
	avoid []*upstream.Endpoint // the target's endpoints that failed the request already
	// targets follow: a 400 is held, so that a context-length error
	// goes to the next one
	more bool
	// the attempt carries the group breaker's half-open trial, which it
	// settles however it ends
	groupTrial bool
}
