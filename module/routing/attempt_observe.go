// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"
	"net/http"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.opentelemetry.io/otel/trace"
)

// An AttemptObserver sees each attempt on a target begin and end: what
// counts attempts (the ledger's GPU occupancy, health scores and
// latencies, traces, configuration faults, breakers) does it here, never
// in the attempt's own code. A target holds the observers its config
// calls for (see TargetKit.ObserversOf); their ends run in the reverse
// order of their begins, however the attempt ends (a stream broken off
// after its first byte ends in a panic).
type AttemptObserver interface {
	// AttemptBegan is called as the attempt starts. ctx is the
	// attempt's; the one it returns is the attempt's from then on (the
	// attempt's span).
	AttemptBegan(ctx context.Context, a *AttemptRecord) context.Context
	// AttemptEnded is called once the attempt is judged.
	AttemptEnded(a *AttemptRecord)
}

// AttemptRecord is what an attempt's observers see of it: set as it
// begins, completed as it ends, and where they keep what they need of
// it in between.
type AttemptRecord struct {
	Target  *Target
	Turn    AttemptTurn // its place in the plan
	Number  int         // its number in the request, from 1
	Began   time.Time
	Request *AttemptRequest

	span trace.Span // its span, if the request is traced

	// as it ends
	Result AttemptResult
	Status int      // the upstream's, if held or a fallback status (0: none, or the answer's)
	Failed *Attempt // why it failed before its first byte, if it did
	// the time to its answer's first byte, if it answered a stream (0:
	// the whole attempt is its latency)
	FirstByte time.Duration
	Slot      *upstream.Slot // the selection policy's handle, in a vLLM group
}

// AttemptRequest is what an attempt's observers see of its request.
type AttemptRequest struct {
	Alias  string
	API    *protocol.API
	Stream bool
	HTTP   *http.Request // the client's: its replacer names the upstream an attempt went to
	Parent trace.Span    // the request's span, if it is traced
	Usage  *protocol.UsageScanner
}

// Attempt is the record of one try of one target.
type Attempt struct {
	Target *Target
	Reason Reason // empty when it answered
	Status int    // upstream status, when it answered with a fallback status
	// an overflow skip whose target the request came back to (see run)
	Returned bool
	// how long the upstream asked to wait (its Retry-After), if it did
	Wait time.Duration
}

// AttemptResult is how one attempt ended.
type AttemptResult struct {
	// the response has started (the client got bytes, successful or
	// not): no other target may be tried
	Done     bool
	Endpoint *upstream.Endpoint // the vLLM endpoint it went to, if known
	Verdict  Verdict            // what it says about the upstream
	Cause    breaker.Cause      // of a failure, for the endpoint's breaker
	// the endpoint, or the cloud group, answered 429 with Retry-After
	// and is held out
	Held bool
	Gone bool // the client left before the first byte
	// the request could not be written on a pooled connection the
	// upstream had closed: it goes again, once, on a new one
	Stale bool
}

// AttemptTurn is an attempt's place in the request's plan.
type AttemptTurn struct {
	Avoid []*upstream.Endpoint // the target's endpoints that failed the request already
	// targets follow: a 400 is held, so that a context-length error
	// goes to the next one
	More bool
	// the attempt carries the group breaker's half-open trial, which it
	// settles however it ends
	GroupTrial bool
}
