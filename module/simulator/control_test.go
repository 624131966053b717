// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
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

func TestKVControl(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	v := simulator.NewVLLM(simulator.VLLMConfig{KVCacheTokens: 1600, Clock: clock.Now})
	url := start(t, simulator.WithControl(v)).URL()
	kv := url + "/_sim/kv"

	expect(t, get(t, kv), 200, `{"floor":0,"from":0,"climb_to":0,"over":"0s","remaining":"0s","kv_cache_usage_perc":[0],"model_usage":[0],"num_gpu_blocks":100}`)
	expect(t, post(t, kv, `{"usage":0.9}`), 200, `{"floor":0.9,"from":0.9,"climb_to":0.9,"over":"0s","remaining":"0s","kv_cache_usage_perc":[0.9],"model_usage":[0],"num_gpu_blocks":100}`)
	wantKV(t, url, "0", 0.9, "usage 0.9")

	// from the current floor
	expect(t, post(t, kv, `{"climb_to":0.95,"over":"10s"}`), 200, `{"floor":0.9,"from":0.9,"climb_to":0.95,"over":"10s","remaining":"10s","kv_cache_usage_perc":[0.9],"model_usage":[0],"num_gpu_blocks":100}`)
	wantKV(t, url, "0", 0.9, "climb at t0")
	clock.Advance(5 * time.Second)
	wantKV(t, url, "0", 0.925, "climb halfway")
	clock.Advance(5 * time.Second)
	wantKV(t, url, "0", 0.95, "climb done")
	clock.Advance(time.Minute)
	wantKV(t, url, "0", 0.95, "after the climb")

	// from a given start
	expect(t, post(t, kv, `{"usage":0.1,"climb_to":0.5,"over":"4s"}`), 200, "")
	wantKV(t, url, "0", 0.1, "second climb at t0")
	clock.Advance(2 * time.Second)
	r := get(t, kv)
	expect(t, r, 200, "")
	var st struct {
		Floor     float64   `json:"floor"`
		From      float64   `json:"from"`
		ClimbTo   float64   `json:"climb_to"`
		Over      string    `json:"over"`
		Remaining string    `json:"remaining"`
		Usage     []float64 `json:"kv_cache_usage_perc"`
	}
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatal(err)
	}
	if !near(st.Floor, 0.3) || st.From != 0.1 || st.ClimbTo != 0.5 || st.Over != "4s" || st.Remaining != "2s" ||
		len(st.Usage) != 1 || !near(st.Usage[0], 0.3) {
		t.Errorf("GET halfway: %s", r.body)
	}
	wantKV(t, url, "0", 0.3, "second climb halfway")
	clock.Advance(2 * time.Second)
	wantKV(t, url, "0", 0.5, "second climb done")

	// climb_to without over: at once
	expect(t, post(t, kv, `{"climb_to":0.7}`), 200, "")
	wantKV(t, url, "0", 0.7, "climb at once")

	for _, bad := range []string{`{"usage":1.5}`, `{"usage":-0.1}`, `{"climb_to":2,"over":"1s"}`, `{"over":"1s"}`,
		`{"climb_to":0.5,"over":"soon"}`, `{"climb_to":0.5,"over":"-1s"}`, `{"usage":"high"}`, `{"level":0.5}`, `[`} {
		r := post(t, kv, bad)
		expect(t, r, 400, "")
		if !strings.HasPrefix(r.body, `{"error":`) {
			t.Errorf("%s: body %s", bad, r.body)
		}
	}
	wantKV(t, url, "0", 0.7, "after refused bodies")
	r = do(t, context.Background(), http.MethodPut, kv, `{}`)
	expect(t, r, 405, `{"error":"method not allowed"}`)
	if allow := r.header.Get("Allow"); allow != "GET, POST" {
		t.Errorf("Allow = %q", allow)
	}

	expect(t, post(t, kv, `{}`), 200, `{"floor":0,"from":0,"climb_to":0,"over":"0s","remaining":"0s","kv_cache_usage_perc":[0],"model_usage":[0],"num_gpu_blocks":100}`)
	wantKV(t, url, "0", 0, "reset")

	// a cloud has no KV cache
	curl := start(t, simulator.WithControl(simulator.NewCloud(simulator.CloudConfig{}))).URL()
	expect(t, get(t, curl+"/_sim/kv"), 404, `{"error":"this simulator has no KV cache"}`)
}
