// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
	"github.com/tidwall/gjson"
)

// A bounded burst against a self-hosted group of 4 slots with a queue
// allowed: what exceeds the red line or arrives during overflow lands on
// the cloud with the cloud's model name, nothing fails, and traffic
// returns to self-hosted after the burst.
func TestBurstOverflowsToCloudAndReturns(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{MaxNumSeqs: 4, TTFT: 150 * time.Millisecond, ITL: 5 * time.Millisecond},
		simulator.CloudConfig{TTFT: 10 * time.Millisecond})
	e.load(vllmBlock(`	max_num_seqs 4
	max_queue 2
	overflow {
		inflight 5 2
		waiting 3 1
		dwell 300ms
	}
	probe {
		metrics_interval 50ms
	}
`))

	const burst = 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	landed := map[string]int{}
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Replace(chatBody, `"Say hello"`, fmt.Sprintf(`"burst %d"`, i), 1)
			resp, b := post(t, "/v1/chat/completions", body)
			if resp.StatusCode != 200 {
				t.Errorf("request %d failed: %d %s", i, resp.StatusCode, b)
				return
			}
			mu.Lock()
			landed[resp.Header.Get("X-Hybrid-Target")]++
			mu.Unlock()
		}()
	}
	wg.Wait()

	selfGot, cloudGot := len(e.selfPosts()), len(e.cloudPosts())
	if landed["self"]+landed["cloud"] != burst || landed["self"] != selfGot || landed["cloud"] != cloudGot {
		t.Fatalf("landed %v; self received %d, cloud %d", landed, selfGot, cloudGot)
	}
	if cloudGot == 0 || selfGot == 0 {
		t.Errorf("a burst of %d on 4 slots + 2 queued: self %d, cloud %d", burst, selfGot, cloudGot)
	}
	for _, m := range models(e.cloudPosts()) {
		if m != cloudModel {
			t.Errorf("cloud received model %q", m)
		}
	}
	for _, m := range models(e.selfPosts()) {
		if m != selfModel {
			t.Errorf("self received model %q", m)
		}
	}
	// after the burst, once the dwell has passed and the queue drained,
	// traffic returns to self-hosted
	waitFor(t, "traffic back on self-hosted", func() bool {
		group, _ := routeOf(t)
		return group == "self"
	})
}

// A TTFT overflow keeps requests away from the group, so the group's TTFT
// window goes quiet; that must end the overflow, not hold it for good.
func TestTTFTOverflowEndsOnceQuiet(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{TTFT: 300 * time.Millisecond}, simulator.CloudConfig{})
	e.load(vllmBlock("\tprobe {\n\t\tmetrics_interval 50ms\n\t\tttft_window 1s\n\t}\n" +
		"\toverflow {\n\t\tttft_p99 200ms 100ms\n\t\tdwell 500ms\n\t}\n"))
	waitFor(t, "the slow TTFT to overflow the group", func() bool {
		_, reason := routeOf(t)
		return reason == "self:overflow"
	})
	waitFor(t, "traffic back on self once its TTFT window is quiet", func() bool {
		group, _ := routeOf(t)
		return group == "self"
	})
}

// An overflowed request says so in its headers and log record.
func TestOverflowIsMarked(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{TTFT: 400 * time.Millisecond}, simulator.CloudConfig{})
	e.load(vllmBlock("\toverflow {\n\t\tinflight 1 0\n\t\tdwell 1ms\n\t}\n"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(t, "/v1/chat/completions", chatBody)
	}()
	waitFor(t, "one request in flight at self", func() bool { return len(e.selfPosts()) == 1 })
	resp, body := post(t, "/v1/chat/completions", chatBody, "X-Request-Id", "overflowed-1")
	<-done
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	if got := resp.Header.Get("X-Hybrid-Overflow"); got != "self:inflight" {
		t.Errorf("X-Hybrid-Overflow %q", got)
	}
	if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != "self:overflow" {
		t.Errorf("X-Hybrid-Fallback-Reason %q", got)
	}
	entry := e.accessLog("overflowed-1")
	if entry["llm_overflow"] != true || entry["llm_overflow_reason"] != "self:inflight" {
		t.Errorf("log record: overflow %v reason %v", entry["llm_overflow"], entry["llm_overflow_reason"])
	}
}

func TestPreRoutingRules(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "alias cloud-first {", `alias routed {
	target self `+selfModel+`
	target cloud `+cloudModel+`
	route cloud {
		header X-Workload batch
	}
	route cloud {
		field tools
	}
	route cloud {
		prompt_tokens_over 100
	}
	route cloud {
		max_tokens_over 1000
	}
}
alias cloud-first {`, 1))

	base := `{"model":"routed","messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body string
		header     []string
		want       string
	}{
		{"plain", base + `}`, nil, "self"},
		{"batch header", base + `}`, []string{"X-Workload", "batch"}, "cloud"},
		{"other header value", base + `}`, []string{"X-Workload", "interactive"}, "self"},
		{"tools", base + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, nil, "cloud"},
		{"tools null", base + `,"tools":null}`, nil, "self"},
		{"long prompt", `{"model":"routed","messages":[{"role":"user","content":"` + strings.Repeat("word ", 100) + `"}]}`, nil, "cloud"},
		{"big max_tokens", base + `,"max_tokens":4000}`, nil, "cloud"},
		{"small max_tokens", base + `,"max_tokens":40}`, nil, "self"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, "/v1/chat/completions", tc.body, tc.header...)
			if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != tc.want {
				t.Fatalf("%d, landed on %q, want %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), tc.want, body)
			}
			if tc.want == "cloud" && resp.Header.Get("X-Hybrid-Route") != "cloud" {
				t.Errorf("X-Hybrid-Route %q", resp.Header.Get("X-Hybrid-Route"))
			}
		})
	}
}

// A long prompt never reaches the small-window target; a context-length
// 400 from vLLM is followed by the larger target's answer.
func TestContextWindow(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{MaxModelLen: 100}, simulator.CloudConfig{MaxModelLen: 128000})
	e.load(defaultGateway + `
alias lying-window {
	target self ` + selfModel + ` {
		context_window 100000
	}
	target cloud ` + cloudModel + `
}
`)
	long := `{"model":"chat-main","messages":[{"role":"user","content":"` + strings.Repeat("word ", 120) + `"}],"max_tokens":10}`
	resp, body := post(t, "/v1/chat/completions", long)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != "self:context_window" {
		t.Errorf("reason %q", got)
	}
	if n := len(e.selfPosts()); n != 0 {
		t.Errorf("the small-window target got %d requests", n)
	}
	// short requests still go to self
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("short request landed on %s", group)
	}

	// a target whose window is misstated: vLLM's own 400 moves the request
	resp, body = post(t, "/v1/chat/completions", strings.Replace(long, "chat-main", "lying-window", 1))
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != "self:context_length" {
		t.Errorf("reason %q", got)
	}
	// any other 400 is the answer
	resp, body = post(t, "/v1/chat/completions", `{"model":"lying-window","messages":"not a list"}`)
	if resp.StatusCode != 400 || resp.Header.Get("X-Hybrid-Target") != "self" || !strings.Contains(string(body), `"error"`) {
		t.Errorf("a plain 400: %d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
}

// viaStandIn makes the self group a stand-in upstream with handler h
// (and the self target these options), sends body, and checks that the
// cloud answered after self failed for the given reason.
func viaStandIn(t *testing.T, e *env, h http.HandlerFunc, targetOptions, body, reason string) []byte {
	t.Helper()
	srv, err := simulator.Start("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	block := withPlainSelf(defaultGateway, srv.URL())
	if targetOptions != "" {
		block = strings.Replace(block, "target self "+selfModel+"\n", "target self "+selfModel+" {\n"+targetOptions+"\n}\n", 1)
	}
	e.load(block)
	resp, got := post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), got)
	}
	if r := resp.Header.Get("X-Hybrid-Fallback-Reason"); r != reason {
		t.Errorf("reason %q, want %q", r, reason)
	}
	return got
}

// A stream whose first byte does not come in time is abandoned for the
// next target before anything reached the client.
func TestFirstByteTimeout(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// headers at once, then silence
	body := viaStandIn(t, e, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, "first_byte_timeout 300ms", streamBody, "self:first_byte_timeout")
	events := sseEvents(body)
	if len(events) < 2 || events[len(events)-1] != "[DONE]" || !strings.Contains(events[0], `"model":"chat-main"`) {
		t.Errorf("stream %q", events)
	}
}

// A 400 whose body stalls is held (it might be a context-length error)
// when the first-byte timer fires: the attempt is abandoned as a timeout,
// and neither the partial 400 nor a wrong reason reaches the client.
func TestFirstByteTimeoutDuringHeldError(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	body := viaStandIn(t, e, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"This model's maximum`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, "first_byte_timeout 300ms", streamBody, "self:first_byte_timeout")
	if strings.Contains(string(body), "maximum") {
		t.Errorf("the stalled 400 leaked: %s", body)
	}
}

// A 400 is held while a next target could take a context-length error;
// one whose connection breaks before its body is whole is no answer: the
// next target answers, and no truncated body reaches the client.
func TestTruncatedHeldErrorFallsBack(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	body := viaStandIn(t, e, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "200")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"This model's`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection breaks
	}, "", chatBody, "self:connection_reset")
	if strings.Contains(string(body), "This model's") {
		t.Errorf("the truncated 400 leaked: %s", body)
	}
}

// allowed_fails failures open the group's breaker: the next requests skip
// the group without touching it.
func TestBreakerOpensForGroup(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(vllmBlock("\tbreaker {\n\t\tallowed_fails 2\n\t\twindow 1m\n\t\tcooldown 1h\n\t}\n"))
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 500})
	for range 2 {
		if group, reason := routeOf(t); group != "cloud" || reason != "self:http_500" {
			t.Fatalf("%s %s", group, reason)
		}
	}
	e.wantSelfSkipped(3, "self:breaker_open")
}

// retries on a target go to the group's other endpoints.
func TestRetriesAvoidTheFailedEndpoint(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	second, srv := secondSelf(t)
	block := strings.Replace(vllmBlock(""), "proxy {SELF}", "proxy {SELF} "+srv.URL(), 1)
	block = strings.Replace(block, "target self "+selfModel+"\n", "target self "+selfModel+" {\nretries 1\n}\n", 1)
	e.load(block)
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	second.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})

	// both fail: self tried twice (once per endpoint), then the cloud
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:http_503, self:http_503" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	if a, b := len(e.selfPosts()), len(posts(second.Requests())); a != 1 || b != 1 {
		t.Errorf("endpoints got %d and %d, want one each", a, b)
	}
	// one recovers: the retry finds it
	second.SetFailures(simulator.Failures{})
	for range 4 {
		resp, _ := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Errorf("with one endpoint healthy: %d %s (%s)", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"))
		}
	}
}

// A peak spills to the cloud; what a rate-limited cloud refuses comes
// back to self-hosted up to its red line, and only what neither can take
// gets 429 with Retry-After. A 429 keeps the cloud out as long as it
// asked: it is not hit again by every request of the peak.
func TestRateLimitedCloudHandsOverflowBack(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// self-hosted holds every completion until the test lets go, so that
	// its red line (4 + 4 per endpoint) is reached and stays reached
	gate, arrived := make(chan struct{}), make(chan struct{}, 64)
	self := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			arrived <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		e.self.ServeHTTP(w, r) // probes see a healthy vLLM
	})
	// a cloud that is not ours: the first three completions answered,
	// then its rate limit, asking for 30s
	cloud, cloudGot := limitingCloud(t, 3)
	block := strings.Replace(vllmBlock(`	max_num_seqs 4
	max_queue 4
	overflow {
		inflight 2 1
		dwell 1h
	}
`), "proxy {SELF}", "proxy "+self.URL(), 1)
	e.load(strings.Replace(block, "proxy {CLOUD}", "proxy "+cloud.URL(), 1))

	type answer struct {
		status                       int
		target, retryAfter, overflow string
		code                         string
	}
	answers := make(chan answer, 64)
	send := func() {
		resp, body := post(t, "/v1/chat/completions", chatBody)
		a := answer{status: resp.StatusCode, target: resp.Header.Get("X-Hybrid-Target"), retryAfter: resp.Header.Get("Retry-After"),
			overflow: resp.Header.Get("X-Hybrid-Overflow")}
		if resp.StatusCode != http.StatusOK {
			var ae apiErr
			if err := json.Unmarshal(body, &ae); err != nil || ae.Error.Code == nil {
				t.Errorf("%d is not an OpenAI error: %s", resp.StatusCode, body)
			} else {
				a.code = *ae.Error.Code
			}
		}
		answers <- a
	}
	// one request at a time, each placed (held by self-hosted, or
	// answered) before the next: the two that start the overflow and
	// the six that come back from the rate-limited cloud fill self-hosted
	// to its red line, the cloud answers three, and the rest are refused
	var got []answer
	held := 0
	for i := range 30 {
		go send()
		select {
		case <-arrived:
			held++
		case a := <-answers:
			got = append(got, a)
		case <-time.After(20 * time.Second):
			t.Fatalf("request %d: neither held by self-hosted nor answered", i)
		}
	}
	// then fifty at once, while both are full
	for range 50 {
		go send()
	}
	for range 50 {
		select {
		case a := <-answers:
			got = append(got, a)
		case <-arrived:
			t.Fatal("self-hosted got a request past its red line")
		case <-time.After(20 * time.Second):
			t.Fatal("no answer")
		}
	}
	if held != 8 {
		t.Errorf("self-hosted held %d requests, want its red line, 8", held)
	}
	count := map[string]int{}
	for _, a := range got {
		switch {
		case a.status == http.StatusOK:
			count["200 "+a.target]++
			if a.target == "cloud" && a.overflow != "self:inflight" {
				t.Errorf("an answer from the cloud says X-Hybrid-Overflow %q", a.overflow)
			}
		case a.status == http.StatusTooManyRequests && a.code == "capacity_exceeded" && a.retryAfter != "":
			count["429"]++
		default:
			t.Errorf("answer %+v, want 200 or 429 capacity_exceeded with Retry-After", a)
		}
	}
	if count["200 cloud"] != 3 || count["429"] != 80-8-3 {
		t.Errorf("answers %v, want 3 from the cloud and %d refused with 429", count, 80-8-3)
	}
	if n := cloudGot.Load(); n != 4 {
		t.Errorf("the cloud got %d requests, want its 3 and the one it refused with Retry-After", n)
	}
	st := adminGet(t, "/hybrid_llm/state")
	until := gjson.GetBytes(st, `gateways.0.groups.#(name=="cloud").rate_limited_until`).Time()
	if d := time.Until(until); d < 20*time.Second || d > 30*time.Second {
		t.Errorf("the state says the cloud is rate-limited until %v, want about 30s from now", until)
	}

	next := func() answer {
		select {
		case a := <-answers:
			return a
		case <-time.After(20 * time.Second):
			t.Fatal("no answer")
		}
		return answer{}
	}
	close(gate)
	for range held {
		// the six that came back did not overflow in the end
		if a := next(); a.status != http.StatusOK || a.target != "self" || a.overflow != "" {
			t.Errorf("a request held by self-hosted: %+v", a)
		}
	}
	// overflow still on (its dwell), the cloud still asking for time:
	// self-hosted, under its red line again, takes the next one
	go send()
	if a := next(); a.status != http.StatusOK || a.target != "self" {
		t.Errorf("after the peak: %+v", a)
	}
	if n := cloudGot.Load(); n != 4 {
		t.Errorf("the cloud got %d requests within its Retry-After", n)
	}
}

// A cloud that answers 429 with Retry-After is not asked again before
// then, neither by the target's own retries nor by the next requests.
func TestRateLimitedCloudIsNotRetried(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	cloud, got := limitingCloud(t, 0)
	block := strings.Replace(defaultGateway, "proxy {CLOUD}", "proxy "+cloud.URL(), 1)
	e.load(strings.Replace(block, "\ttarget cloud "+cloudModel+"\n\ttarget self", "\ttarget cloud "+cloudModel+" {\n\t\tretries 2\n\t}\n\ttarget self", 1))
	for i := range 3 {
		resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("request %d: %d from %q: %s", i, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the cloud got %d requests within its Retry-After, want 1", n)
	}
}

// limitingCloud is a cloud that is not ours: it lists cloudModel, answers
// the first allow completions, then refuses every one with its rate
// limit, asking for 30s. It counts the completions it was sent.
func limitingCloud(t *testing.T, allow int32) (*simulator.Server, *atomic.Int32) {
	var got atomic.Int32
	return standIn(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+cloudModel+`","object":"model","created":0,"owned_by":"system"}]}`)
			return
		}
		if got.Add(1) > allow {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for %s on requests per min (RPM): Limit %d, Used %d, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
				cloudModel, allow, allow)
			return
		}
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":0,"model":"`+cloudModel+`","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}), &got
}
