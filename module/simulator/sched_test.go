// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// With --scheduling-policy priority an engine's waiting requests start by
// their priority field, lower first, then by arrival. One slot, held by a
// request waiting an hour for its second token, lets the others queue;
// when it goes, they run one at a time, and the Clock (a counter, read
// once for each answer's "created" while its request holds the slot) gives
// the order they started in.
func TestVLLMPriorityScheduling(t *testing.T) {
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(1_000_000+tick.Add(1), 0) }
	v, url := newVLLM(t, simulator.VLLMConfig{MaxNumSeqs: 1, SchedulingPolicy: "priority", ITL: time.Hour, Clock: clock})
	if got := v.Config().SchedulingPolicy; got != "priority" {
		t.Errorf("SchedulingPolicy = %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocker := background(ctx, url+"/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":"hold the slot"}]}`)
	waitLoad(t, v, 1, 0)

	queued := []struct {
		name     string
		priority int
	}{{"A", 5}, {"B", 0}, {"C", 3}, {"D", 3}, {"E", -1}}
	chans := make([]<-chan response, len(queued))
	for i, q := range queued {
		path, body := "/v1/chat/completions", fmt.Sprintf(`{"max_tokens":1,"priority":%d,"messages":[{"role":"user","content":"request %s"}]}`, q.priority, q.name)
		if q.name == "C" { // completions read priority too
			path, body = "/v1/completions", fmt.Sprintf(`{"max_tokens":1,"priority":%d,"prompt":"request %s"}`, q.priority, q.name)
		}
		chans[i] = background(context.Background(), url+path, body)
		waitLoad(t, v, 1, i+1)
	}
	cancel()
	if r := recv(t, blocker); r.err == nil {
		t.Errorf("the blocking request finished: %d", r.status)
	}

	created := map[string]int64{}
	names := make([]string, len(queued))
	for i, q := range queued {
		r := recv(t, chans[i])
		expect(t, r, 200, "")
		created[q.name] = gjson.Get(r.body, "created").Int()
		names[i] = q.name
	}
	sort.Slice(names, func(i, j int) bool { return created[names[i]] < created[names[j]] })
	if got := strings.Join(names, ""); got != "EBCDA" {
		t.Errorf("start order %s (created %v), want E B C D A: priorities -1, 0, 3, 3 (in arrival order), 5", got, created)
	}
	waitLoad(t, v, 0, 0)
}

// Under fcfs (the default) a request with a priority other than 0 is
// refused the way vLLM refuses it; priority 0 is accepted, and vLLM's
// Messages API, which has no priority field, ignores it.
func TestVLLMPriorityNeedsPolicy(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{})
	if got := v.Config().SchedulingPolicy; got != "fcfs" {
		t.Errorf("default SchedulingPolicy = %q", got)
	}
	refused := `{"error":{"message":"Got priority 2 but Priority scheduling is not enabled.","type":"BadRequestError","param":null,"code":400}}`
	expect(t, post(t, url+"/v1/chat/completions", `{"priority":2,"messages":[{"role":"user","content":"hi"}]}`), 400, refused)
	expect(t, post(t, url+"/v1/completions", `{"priority":2,"prompt":"hi"}`), 400, refused)
	expect(t, post(t, url+"/v1/embeddings", `{"priority":-7,"input":"hi"}`), 400,
		`{"error":{"message":"Got priority -7 but Priority scheduling is not enabled.","type":"BadRequestError","param":null,"code":400}}`)
	expect(t, post(t, url+"/v1/chat/completions", `{"priority":0,"messages":[{"role":"user","content":"hi"}]}`), 200, "")
	expect(t, post(t, url+"/v1/messages", `{"priority":2,"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`), 200, "")
	// The refusals never reached the engine: two requests ran.
	mfs := scrape(t, url)
	if got := value(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": "stop"}) +
		value(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": "length"}); got != 2 {
		t.Errorf("requests run = %v, want 2", got)
	}
}
