// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// classesGateway loads the default gateway with its self group's red
// line at 4 (max_num_seqs 4), shared by class with vLLM's priority field
// and a queue of the given size and wait, and six clients: ui
// (interactive), nightly (batch), shed (batch, sheddable), shedstd
// (standard, sheddable), ops (trusted) and app (standard).
// It returns the clients' keys by name.
func classesGateway(t *testing.T, e *env, queue string) map[string]string {
	t.Helper()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	keys := map[string]string{}
	clients := "clients {\n"
	for name, opts := range map[string]string{"ui": "class interactive", "nightly": "class batch", "shed": "class batch\n\t\tsheddable", "shedstd": "sheddable", "ops": "trusted", "app": ""} {
		keys[name] = "sk-" + name + "-" + run
		clients += "\tclient " + name + " " + hashed(keys[name]) + " {\n\t\t" + opts + "\n\t}\n"
	}
	block := strings.Replace(defaultGateway, "\tkind vllm\n", "\tkind vllm\n\tmax_num_seqs 4\n\tclasses {\n\t\tpriority\n\t\tqueue "+queue+"\n\t}\n", 1)
	e.load(block + clients + "}\n")
	waitProbed(t)
	return keys
}

// holdStream opens a stream of body that runs until cancel is called
// (the vLLM makes a token a second): an in-flight request of the client
// of key ("" for none). It returns the group that answers it; cancel
// waits for the request's access log record, the last thing the gateway
// writes of it.
func holdStream(t *testing.T, e *env, key, body string) (group string, cancel func()) {
	t.Helper()
	if body == "" {
		body = `{"model":"chat-main","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"write a long story"}]}`
	}
	ctx, stop := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	id := "held-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		stop()
		t.Fatalf("a stream answered %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Hybrid-Target"), func() {
		stop()
		resp.Body.Close()
		e.accessLog(id) // waits for it
	}
}

// queued is how many requests wait in the self group's queue, from the
// state.
func queued(t *testing.T, e *env) int64 {
	return gjson.GetBytes(adminGet(t, "/hybrid_llm/state?gateway="+e.gatewayName()), `gateways.0.groups.#(name=="self").classes.queued`).Int()
}

// Under a burst the classes leave self-hosted in order: batch past its
// share of the red line (half) and everyone past the red line go to the
// cloud, never a 503; interactive keeps the rest of the slots. vLLM gets
// each request's class as its priority field (the client's own is
// replaced; a trusted client names a class in X-Hybrid-Class, others
// cannot). A sheddable client never goes to the cloud: it waits in the
// group's queue for a slot (one more than the queue holds gets 429 at
// once), and gets 429 with Retry-After when its wait is over.
func TestPriorityClassesSpillInOrder(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, ITL: time.Second, SchedulingPolicy: "priority"}, simulator.CloudConfig{})
	keys := classesGateway(t, e, "1 4s")
	ask := func(who, content string, header ...string) (*http.Response, []byte) {
		t.Helper()
		body := `{"model":"chat-main","max_tokens":1,"priority":-7,"messages":[{"role":"user","content":"` + content + `"}]}`
		return post(t, "/v1/chat/completions", body, append([]string{"Authorization", "Bearer " + keys[who]}, header...)...)
	}

	// the class reaches vLLM as its priority, the client's own left out;
	// only a trusted client's header names another class
	for _, c := range []struct {
		who, header string
		priority    int64
	}{{"ui", "", 0}, {"app", "", 1}, {"nightly", "", 2}, {"ops", "batch", 2}, {"app", "interactive", 1}} {
		content := "priority of " + c.who + " asking " + c.header
		resp, body := ask(c.who, content, "X-Hybrid-Class", c.header)
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("%s: %d %s", c.who, resp.StatusCode, body)
		}
		var got []simulator.RecordedRequest
		for _, r := range e.selfPosts() {
			if strings.Contains(string(r.Body), content) {
				got = append(got, r)
			}
		}
		if len(got) != 1 || strings.Count(string(got[0].Body), `"priority"`) != 1 || gjson.GetBytes(got[0].Body, "priority").Int() != c.priority || got[0].Header.Get("X-Hybrid-Class") != "" {
			t.Errorf("%s (X-Hybrid-Class %q): vLLM got %d requests, the first %s %v, want priority %d", c.who, c.header, len(got), firstBody(got), firstHeader(got), c.priority)
		}
	}

	// batch fills its half of the red line; the next batch request spills
	var holds []func()
	defer func() {
		for _, stop := range holds {
			stop()
		}
	}()
	for range 2 {
		g, stop := holdStream(t, e, keys["nightly"], "")
		holds = append(holds, stop)
		if g != "self" {
			t.Fatalf("batch within its share went to %s", g)
		}
	}
	resp, body := ask("nightly", "batch past its share")
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:class_reserve" {
		t.Errorf("batch past its share: %d %s %q %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	// interactive takes the rest, to the red line; past it, the cloud
	for range 2 {
		g, stop := holdStream(t, e, keys["ui"], "")
		holds = append(holds, stop)
		if g != "self" {
			t.Fatalf("interactive within the red line went to %s", g)
		}
	}
	resp, body = ask("ui", "interactive past the red line")
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:red_line" {
		t.Errorf("interactive past the red line: %d %s %q %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}

	// a sheddable request waits for a slot rather than go to the cloud
	type answer struct {
		resp *http.Response
		body []byte
	}
	waited := make(chan answer, 1)
	go func() {
		resp, body := post(t, "/v1/chat/completions", `{"model":"chat-main","max_tokens":1,"messages":[{"role":"user","content":"shed, waiting"}]}`,
			"Authorization", "Bearer "+keys["shed"], "X-Request-Id", "shed-waiting")
		waited <- answer{resp, body}
	}()
	waitFor(t, "the sheddable request in the queue", func() bool { return queued(t, e) == 1 })
	resp, body = ask("shed", "shed, one too many")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || gjson.GetBytes(body, "error.code").Str != "capacity_exceeded" {
		t.Errorf("past a full queue: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// slots given back: below batch's share, the request waiting gets one
	for _, stop := range holds[1:] {
		stop()
	}
	holds = holds[:1]
	a := <-waited
	if a.resp.StatusCode != 200 || a.resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Fatalf("the request waiting: %d %s %s", a.resp.StatusCode, a.resp.Header.Get("X-Hybrid-Target"), a.body)
	}
	waitFor(t, "its record", func() bool { return e.accessLog("shed-waiting") != nil })
	if rec := e.accessLog("shed-waiting"); rec["llm_queued"] != true || rec["llm_class"] != "batch" {
		t.Errorf("the access log of the request that waited: %v", rec)
	}

	// full for batch again: a sheddable request waits its 4s, then 429
	g, stop := holdStream(t, e, keys["nightly"], "")
	holds = append(holds, stop)
	if g != "self" {
		t.Fatalf("batch within its share went to %s", g)
	}
	resp, body = ask("shed", "shed, in vain")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || gjson.GetBytes(body, "error.code").Str != "capacity_exceeded" {
		t.Errorf("a wait in vain: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	for _, r := range e.cloudPosts() {
		if strings.Contains(string(r.Body), "shed") {
			t.Errorf("a sheddable request reached the cloud: %s", r.Body)
		}
	}
}

func firstBody(rs []simulator.RecordedRequest) string {
	if len(rs) == 0 {
		return ""
	}
	return string(rs[0].Body)
}

func firstHeader(rs []simulator.RecordedRequest) http.Header {
	if len(rs) == 0 {
		return nil
	}
	return rs[0].Header
}

// While the group overflows, standard and batch requests leave it and
// interactive ones stay, up to the red line.
func TestInteractiveStaysWhileTheGroupOverflows(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, ITL: time.Second, SchedulingPolicy: "priority"}, simulator.CloudConfig{})
	keys := map[string]string{}
	block := strings.Replace(defaultGateway, "\tkind vllm\n", "\tkind vllm\n\tmax_num_seqs 4\n\tclasses\n\toverflow {\n\t\tinflight 1 0\n\t\tdwell 1m\n\t}\n", 1) + "clients {\n"
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for name, class := range map[string]string{"ui": "interactive", "app": "standard", "nightly": "batch"} {
		keys[name] = "sk-" + name + "-" + run
		block += "\tclient " + name + " " + hashed(keys[name]) + " {\n\t\tclass " + class + "\n\t}\n"
	}
	e.load(block + "}\n")
	waitProbed(t)
	g, stop := holdStream(t, e, keys["ui"], "") // one in flight: the group overflows
	defer stop()
	if g != "self" {
		t.Fatalf("the first request went to %s", g)
	}
	for who, want := range map[string]string{"ui": "self", "app": "cloud", "nightly": "cloud"} {
		resp, body := post(t, "/v1/chat/completions", `{"model":"chat-main","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+keys[who])
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != want {
			t.Errorf("%s while the group overflows: %d to %s (%q), want %s; %s", who, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
				resp.Header.Get("X-Hybrid-Fallback-Reason"), want, body)
		}
	}
}

// The queue serves whom a slot fits: a batch request at its head that a
// freed slot does not admit hands the wake on to a standard one behind
// it. A queued request whose retry meets a failing upstream stops
// waiting: the failure is its answer, and the upstream is asked once. A
// repeated priority field is refused, as vLLM would read the last.
func TestQueueServesWhomTheSlotFits(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, ITL: time.Second, SchedulingPolicy: "priority"}, simulator.CloudConfig{})
	keys := classesGateway(t, e, "4 20s")
	resp, body := post(t, "/v1/chat/completions", `{"model":"chat-main","priority":1,"priority":-9,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+keys["app"])
	if resp.StatusCode != http.StatusBadRequest || gjson.GetBytes(body, "error.param").Str != "priority" {
		t.Errorf("a repeated priority field: %d %s", resp.StatusCode, body)
	}

	var holds []func()
	defer func() {
		for _, stop := range holds {
			stop()
		}
	}()
	for range 4 { // the red line
		_, stop := holdStream(t, e, keys["ui"], "")
		holds = append(holds, stop)
	}
	type answer struct {
		who    string
		status int
		target string
	}
	answers := make(chan answer, 2)
	wait := func(who string) {
		go func() {
			resp, _ := post(t, "/v1/chat/completions", `{"model":"chat-main","max_tokens":1,"messages":[{"role":"user","content":"`+who+` waiting"}]}`,
				"Authorization", "Bearer "+keys[who])
			answers <- answer{who, resp.StatusCode, resp.Header.Get("X-Hybrid-Target")}
		}()
	}
	wait("shed")
	waitFor(t, "the batch request in the queue", func() bool { return queued(t, e) == 1 })
	wait("shedstd")
	waitFor(t, "the standard request behind it", func() bool { return queued(t, e) == 2 })
	// two in flight: standard's share (3) has room, batch's (2) none
	holds[0]()
	holds[1]()
	holds = holds[2:]
	if a := <-answers; a.who != "shedstd" || a.status != 200 || a.target != "self" {
		t.Fatalf("the first answer: %+v, want the standard request served by self", a)
	}
	if n := queued(t, e); n != 1 {
		t.Errorf("%d waiting, want the batch request still", n)
	}

	// the upstream now fails: the batch request's retry gets one failure,
	// and that is its answer
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 500})
	before := len(e.selfPosts())
	holds[0]()
	holds = holds[1:]
	if a := <-answers; a.who != "shed" || a.status != http.StatusBadGateway {
		t.Errorf("the batch request after the upstream failed: %+v, want 502", a)
	}
	if n := len(e.selfPosts()) - before; n > 2 {
		t.Errorf("the failing upstream was asked %d times for one request", n)
	}
}
