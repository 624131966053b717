// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
)

// An endpoint that answers 404 for the route of an API its group says it
// serves (a vLLM without /v1/messages) is the config's fault, logged once
// for as long as the config lives: its answers to other APIs do not end
// it, and cost the success path nothing. A target passed over for its
// API before any request is no fault.
func TestRouteMissIsAConfigFaultLoggedOnce(t *testing.T) {
	if !isConfigFault(&Attempt{Reason: because.ProtocolUnsupported, Status: 404}) || isConfigFault(&Attempt{Reason: because.ProtocolUnsupported}) {
		t.Error("a route miss is the config's fault; a gate's pass-over is not")
	}
	var f faultLog
	k := faultKey{endpoint: "10.0.0.5:8000", why: because.ProtocolUnsupported}
	if !f.start(k) || f.start(k) {
		t.Fatal("the fault is new once")
	}
	if f.n.Load() != 0 {
		t.Errorf("a success would look for faults to end: %d", f.n.Load())
	}
	if ended := f.end("10.0.0.5:8000"); len(ended) != 0 || f.start(k) {
		t.Errorf("ended by another answer: %v", ended)
	}
	auth := faultKey{endpoint: "10.0.0.5:8000", why: because.UpstreamAuth}
	if !f.start(auth) || f.n.Load() != 1 {
		t.Fatal("a key refused")
	}
	if ended := f.end("10.0.0.5:8000"); len(ended) != 1 || ended[0] != because.UpstreamAuth {
		t.Errorf("the key's fault ends with an answer: %v", ended)
	}
}
