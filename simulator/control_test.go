// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/simulator"
)

func TestWithControl(t *testing.T) {
	v := simulator.NewVLLM(simulator.VLLMConfig{})
	url := start(t, simulator.WithControl(v)).URL()

	expect(t, post(t, url+"/_sim/health", `{"healthy":false}`), 200, `{"healthy":false}`)
	expect(t, get(t, url+"/health"), 503, "")
	expect(t, post(t, url+"/_sim/health", `{"healthy":true}`), 200, "")
	expect(t, get(t, url+"/health"), 200, "")
	expect(t, post(t, url+"/_sim/health", `{}`), 400, "")

	expect(t, post(t, url+"/_sim/failures", `{"error_rate":0.5,"error_status":503,"stall":"2s","cut_after_chunks":3}`), 200,
		`{"error_rate":0.5,"error_status":503,"stall":"2s","cut_after_chunks":3}`)
	if f := v.Failures(); f != (simulator.Failures{ErrorRate: 0.5, ErrorStatus: 503, Stall: 2 * time.Second, CutAfterChunks: 3}) {
		t.Errorf("Failures() = %+v", f)
	}
	expect(t, get(t, url+"/_sim/failures"), 200, `{"error_rate":0.5,"error_status":503,"stall":"2s","cut_after_chunks":3}`)
	expect(t, post(t, url+"/_sim/failures", `{"error_rate":2}`), 400, "")
	expect(t, post(t, url+"/_sim/failures", `{"stall":"soon"}`), 400, "")
	expect(t, post(t, url+"/_sim/failures", `{}`), 200, `{"error_rate":0,"error_status":500,"stall":"0s","cut_after_chunks":0}`)
	expect(t, post(t, url+"/v1/chat/completions", chatBody), 200, "")
	expect(t, get(t, url+"/_sim/other"), 404, "")

	// a cloud's health is its /healthz
	c := simulator.NewCloud(simulator.CloudConfig{})
	curl := start(t, simulator.WithControl(c)).URL()
	expect(t, post(t, curl+"/_sim/health", `{"healthy":false}`), 200, "")
	expect(t, get(t, curl+"/healthz"), 503, "")
	expect(t, post(t, curl+"/_sim/failures", `{"error_rate":1}`), 200, "")
	expect(t, post(t, curl+"/v1/chat/completions", cloudChat), 500, "")
}

func TestFailuresJSON(t *testing.T) {
	in := simulator.Failures{ErrorRate: 0.25, ErrorStatus: 502, Stall: 1500 * time.Millisecond, CutAfterChunks: 1}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out simulator.Failures
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Errorf("round trip %s: %+v", b, out)
	}
}
