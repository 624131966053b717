// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// breakerDoc is the part of the admin state these tests read: breakers
// and in-flight counts.
type breakerDoc struct {
	Gateways []struct {
		Groups []struct {
			Name      string       `json:"name"`
			Breaker   *breakerView `json:"breaker"`
			Endpoints []struct {
				Address  string       `json:"address"`
				InFlight int64        `json:"in_flight"`
				Breaker  *breakerView `json:"breaker"`
			} `json:"endpoints"`
		} `json:"groups"`
	} `json:"gateways"`
}

type breakerView struct {
	State     string     `json:"state"`
	OpenUntil *time.Time `json:"open_until"`
	Opened    int64      `json:"opened"`
}

func getBreakers(t *testing.T) breakerDoc {
	t.Helper()
	var doc breakerDoc
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// groupBreaker returns the breaker of a group; endpointBreaker that of one
// endpoint (by address) of a group.
func groupBreaker(t *testing.T, group string) breakerView {
	t.Helper()
	for _, g := range getBreakers(t).Gateways[0].Groups {
		if g.Name == group && g.Breaker != nil {
			return *g.Breaker
		}
	}
	t.Fatalf("group %s has no breaker in the state", group)
	return breakerView{}
}

func endpointBreaker(t *testing.T, group, addr string) breakerView {
	t.Helper()
	for _, g := range getBreakers(t).Gateways[0].Groups {
		for _, ep := range g.Endpoints {
			if g.Name == group && ep.Address == addr && ep.Breaker != nil {
				return *ep.Breaker
			}
		}
	}
	t.Fatalf("endpoint %s of %s has no breaker in the state", addr, group)
	return breakerView{}
}

// cooledDown reports whether an open breaker's cooldown has passed: the
// state reads half_open then, before any request comes.
func cooledDown(b breakerView) bool {
	return b.State != "open"
}

// waitNoInFlight waits until the gateway holds no in-flight slot on any
// endpoint: every reserved slot came back.
func waitNoInFlight(t *testing.T) {
	t.Helper()
	waitFor(t, "every in-flight slot released", func() bool {
		for _, g := range getBreakers(t).Gateways {
			for _, grp := range g.Groups {
				for _, ep := range grp.Endpoints {
					if ep.InFlight != 0 {
						return false
					}
				}
			}
		}
		return true
	})
}

// withBreaker adds a breaker block to a group of a gateway block.
func withBreaker(block, group, breaker string) string {
	i := strings.Index(block, "group "+group+" {\n")
	if i < 0 {
		panic("no group " + group)
	}
	i += len("group " + group + " {\n")
	return block[:i] + "\tbreaker {\n" + breaker + "\t}\n" + block[i:]
}

// A 400 from a vLLM endpoint is the client's business (README: "a 4xx
// answer is a success"): however many bad requests clients send, the
// endpoint keeps getting traffic.
func TestBadRequestsDoNotOpenTheEndpointBreaker(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(withBreaker(defaultGateway, "self", "\t\tallowed_fails 2\n\t\tcooldown 1h\n"))

	bad := `{"model":"chat-main","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`
	for range 3 {
		resp, body := post(t, "/v1/chat/completions", bad)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("a bad request: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
	}
	if group, reason := routeOf(t); group != "self" || reason != "" {
		t.Errorf("after three 400s the healthy endpoint is skipped: %s (%s)", group, reason)
	}
	if b := endpointBreaker(t, "self", e.selfSrv.Addr()); b.State != "closed" || b.Opened != 0 {
		t.Errorf("endpoint breaker %+v after client errors", b)
	}
}

// A stream cut by the upstream is a failure for the group's breaker
// (README: "a cut stream"), as it is for an endpoint's.
func TestCutStreamsOpenTheGroupBreaker(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(withBreaker(defaultGateway, "cloud", "\t\tallowed_fails 2\n\t\tcooldown 1h\n"))
	e.cloud.SetFailures(simulator.Failures{CutAfterChunks: 1})

	cut := strings.Replace(streamBody, "chat-main", "cloud-first", 1)
	for range 2 {
		resp, body := post(t, "/v1/chat/completions", cut)
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" ||
			!strings.Contains(string(body), "stream_interrupted") {
			t.Fatalf("cut stream: %d %q %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
	}
	e.cloud.SetFailures(simulator.Failures{})
	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1))
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" ||
		resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:breaker_open" {
		t.Errorf("after two cut streams: %d from %q (%q): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
			resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	if b := groupBreaker(t, "cloud"); b.State != "open" || b.Opened != 1 {
		t.Errorf("cloud breaker %+v", b)
	}
	series := map[string]string{"gateway": e.gatewayName(), "group": "cloud", "endpoint": ""}
	if open, opened := metricValue(t, "caddy_hybrid_llm_breaker_open", series),
		metricValue(t, "caddy_hybrid_llm_breaker_opened_total", series); open != 1 || opened != 1 {
		t.Errorf("metrics: breaker_open %v, breaker_opened_total %v", open, opened)
	}
}

// The half-open trial of a group's breaker is settled however its request
// ends, also when the response is aborted after its first byte (an
// upstream cut, a client that leaves): otherwise the breaker waits for the
// trial forever and the group never gets traffic again.
func TestAbortedTrialDoesNotBlockTheGroupBreaker(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{ITL: 50 * time.Millisecond})
	e.load(withBreaker(defaultGateway, "cloud", "\t\tallowed_fails 1\n\t\tcooldown 300ms\n"))
	cloudFirst := strings.Replace(chatBody, "chat-main", "cloud-first", 1)
	cloudStream := `{"model":"cloud-first","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":100}`

	open := func() {
		t.Helper()
		e.cloud.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 500})
		if resp, _ := post(t, "/v1/chat/completions", cloudFirst); resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:http_500" {
			t.Fatalf("opening the breaker: %q", resp.Header.Get("X-Hybrid-Fallback-Reason"))
		}
		e.cloud.SetFailures(simulator.Failures{})
		waitFor(t, "the cooldown", func() bool { return cooledDown(groupBreaker(t, "cloud")) })
	}
	recovers := func(what string) {
		t.Helper()
		waitFor(t, "cloud answering again after "+what, func() bool {
			resp, _ := post(t, "/v1/chat/completions", cloudFirst)
			return resp.StatusCode == 200 && resp.Header.Get("X-Hybrid-Target") == "cloud"
		})
		if b := groupBreaker(t, "cloud"); b.State != "closed" {
			t.Errorf("after %s: breaker %+v", what, b)
		}
	}

	// the trial is a non-stream response the upstream cuts half-way
	open()
	e.cloud.SetFailures(simulator.Failures{CutAfterChunks: 1})
	req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(cloudFirst))
	if resp, err := client.Do(req); err == nil {
		if resp.Header.Get("X-Hybrid-Target") != "cloud" {
			t.Fatalf("the trial went to %q", resp.Header.Get("X-Hybrid-Target"))
		}
		_, _ = bufio.NewReader(resp.Body).ReadString(0)
		resp.Body.Close()
	}
	e.cloud.SetFailures(simulator.Failures{})
	recovers("a cut trial")

	// the trial is a stream whose client leaves after the first event
	open()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(cloudStream))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("the trial went to %q", resp.Header.Get("X-Hybrid-Target"))
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event: %q %v", line, err)
	}
	cancel()
	resp.Body.Close()
	recovers("a trial whose client left")
}

// Attempts a request cannot make on a target because every endpoint
// already failed it (retries_exhausted) are not failures of the group:
// one failed request with retries 1 is one failure, not two.
func TestExhaustedRetriesAreNotAFailure(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := withBreaker(vllmBlock(""), "self", "\t\tallowed_fails 2\n\t\tcooldown 1h\n")
	block = strings.Replace(block, "target self "+selfModel+"\n", "target self "+selfModel+" {\n\t\tretries 1\n\t}\n", 1)
	e.load(block)

	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	if group, reason := routeOf(t); group != "cloud" || reason != "self:http_503, self:retries_exhausted" {
		t.Fatalf("one failing endpoint with retries 1: %s (%s)", group, reason)
	}
	e.self.SetFailures(simulator.Failures{})
	if group, reason := routeOf(t); group != "self" {
		t.Errorf("one upstream failure opened a breaker that allows 2: %s (%s)", group, reason)
	}
}

// An endpoint whose half-open trial fails to connect, with the group's
// proxy retrying another endpoint (lb_retries), is open again afterwards
// and gets its next trial after the cooldown: the retry must not leave
// the trial taken forever.
func TestProxyRetryDoesNotLeakTheEndpointTrial(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	_, srv := secondSelf(t)
	block := vllmBlock("\tprobe {\n\t\thealth_interval 1m\n\t\tunknown_metrics ok\n\t}\n")
	block = strings.Replace(block, "proxy {SELF}\n", "proxy {SELF} "+srv.URL()+" {\n\t\tlb_retries 1\n\t}\n", 1)
	// no retries of the target's own: the proxy's retry is the subject
	block = strings.Replace(block, "target self "+selfModel+"\n", "target self "+selfModel+" {\n\t\tretries 0\n\t}\n", 1)
	e.load(withBreaker(block, "self", "\t\tallowed_fails 1\n\t\tcooldown 300ms\n"))
	a := e.selfSrv.Addr()

	// a fails once: its breaker (and the group's) opens
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	if group, reason := routeOf(t); group != "cloud" || reason != "self:http_503" {
		t.Fatalf("a failing: %s (%s)", group, reason)
	}
	if b := endpointBreaker(t, "self", a); b.State != "open" {
		t.Fatalf("setup: a's breaker %+v (the request went elsewhere?)", b)
	}
	e.self.SetFailures(simulator.Failures{})

	// a refuses connections (its health probe has not noticed); after the
	// cooldown, a's trial fails to connect and the proxy retries on b
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cooldowns", func() bool {
		return cooledDown(endpointBreaker(t, "self", a)) && cooledDown(groupBreaker(t, "self"))
	})
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" || resp.Header.Get("X-Hybrid-Fallback") != "" {
		t.Fatalf("a's trial retried on b: %d %q (%q) %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
			resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	if b := endpointBreaker(t, "self", a); b.State != "open" || b.Opened != 2 {
		t.Errorf("a's failed trial: breaker %+v, want open again", b)
	}

	// a is back: after the cooldown its trial succeeds and it gets traffic
	if err := e.selfSrv.Resume(); err != nil {
		t.Fatal(err)
	}
	before := len(e.selfPosts())
	waitFor(t, "a getting requests again", func() bool {
		routeOf(t)
		return len(e.selfPosts()) > before
	})
	waitNoInFlight(t)
}

// Every in-flight slot the gateway reserves on a vLLM endpoint comes back
// however the attempt ends: a client that leaves mid-stream, a stream
// the upstream cuts, a first_byte_timeout that abandons the attempt, a
// held 400, an upstream error. A leaked slot would lower the red line for
// good.
func TestInFlightSlotsComeBack(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: 20 * time.Millisecond}, simulator.CloudConfig{})
	block := vllmBlock("\tmax_num_seqs 2\n")
	block = strings.Replace(block, "target self "+selfModel+"\n", "target self "+selfModel+" {\n\t\tfirst_byte_timeout 200ms\n\t}\n", 1)
	e.load(block)
	longStream := `{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":100}`

	// a client that leaves after the first event
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(longStream))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Fatalf("first event from %q: %q %v", resp.Header.Get("X-Hybrid-Target"), line, err)
	}
	cancel()
	resp.Body.Close()
	waitNoInFlight(t)

	// a stream cut by the upstream
	e.self.SetFailures(simulator.Failures{CutAfterChunks: 2})
	if resp, body := post(t, "/v1/chat/completions", streamBody); !strings.Contains(string(body), "stream_interrupted") {
		t.Fatalf("cut stream: %d %s", resp.StatusCode, body)
	}
	waitNoInFlight(t)

	// first_byte_timeout: the endpoint stalls, the cloud answers
	e.self.SetFailures(simulator.Failures{Stall: 2 * time.Second})
	if resp, _ := post(t, "/v1/chat/completions", streamBody); resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:first_byte_timeout" {
		t.Fatalf("first_byte_timeout: %q", resp.Header.Get("X-Hybrid-Fallback-Reason"))
	}
	waitNoInFlight(t)

	// an upstream error, and a 400
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	if group, reason := routeOf(t); group != "cloud" || reason != "self:http_503" {
		t.Fatalf("upstream error: %s (%s)", group, reason)
	}
	e.self.SetFailures(simulator.Failures{})
	if resp, _ := post(t, "/v1/chat/completions", `{"model":"chat-main","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`); resp.StatusCode != 400 {
		t.Fatalf("400: %d", resp.StatusCode)
	}
	waitNoInFlight(t)

	// the red line is whole: two concurrent streams both land on self
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, _ := post(t, "/v1/chat/completions", longStream); resp.Header.Get("X-Hybrid-Target") != "self" {
				t.Errorf("with the red line at 2, a second request went to %q (%q)", resp.Header.Get("X-Hybrid-Target"),
					resp.Header.Get("X-Hybrid-Fallback-Reason"))
			}
		}()
	}
	wg.Wait()
}

// A 400 from a target with a next one is held to look for a context-length
// error; a long one (vLLM's validation errors quote the request) is still
// the answer, and reaches the client whole, never cut and passed off as
// complete.
func TestLongBadRequestBodyReachesTheClientWhole(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	long := `{"error":{"message":"1 validation error: {'type': 'string_type', 'input': '` + strings.Repeat("x", 100<<10) +
		`'}","type":"BadRequestError","param":null,"code":400}}`
	up, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(long)))
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, long)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	e.load(withPlainSelf(defaultGateway, up.URL()))

	req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Hybrid-Target") != "self" || string(body) != long {
		t.Errorf("%d from %q: %d of %d bytes, %v", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), len(body), len(long), err)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("the cloud got %d requests", n)
	}
}

// Two replicas, one answering 500: the bad one opens its own breaker and
// the good one serves every request; nothing goes to the cloud and the
// group's breaker stays closed. Healed, the bad one is let back in by its
// half-open trial after the cooldown.
func TestOneBadReplicaLeavesTheOtherServing(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	good, srv := secondSelf(t)
	block := strings.Replace(vllmBlock(""), "proxy {SELF}\n", "proxy {SELF} "+srv.URL()+"\n", 1)
	e.load(withBreaker(block, "self", "\t\tallowed_fails 2\n\t\tcooldown 300ms\n"))
	bad := e.selfSrv.Addr()
	groupOpened := groupBreaker(t, "self").Opened

	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 500})
	cloudBefore, goodBefore := len(e.cloudPosts()), len(posts(good.Requests()))
	const n = 25
	for i := range n {
		resp, body := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("request %d: %d from %q (%q): %s", i, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
				resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
		}
	}
	if d := len(e.cloudPosts()) - cloudBefore; d != 0 {
		t.Errorf("the cloud got %d requests while a replica was healthy", d)
	}
	if d := len(posts(good.Requests())) - goodBefore; d != n {
		t.Errorf("the good replica answered %d of %d requests", d, n)
	}
	if b := endpointBreaker(t, "self", bad); b.Opened == 0 {
		t.Errorf("the bad replica's breaker never opened: %+v", b)
	}
	if b := groupBreaker(t, "self"); b.Opened != groupOpened || b.State != "closed" {
		t.Errorf("one bad replica opened the group's breaker: %+v", b)
	}

	e.self.SetFailures(simulator.Failures{})
	badBefore := len(e.selfPosts())
	waitFor(t, "the healed replica let back in", func() bool {
		routeOf(t)
		return len(e.selfPosts()) > badBefore && endpointBreaker(t, "self", bad).State == "closed"
	})
}

// A vLLM killed and restarted on the same address is back as soon as its
// health probe has passed `rise` times in a row, not after the breaker's
// cooldown (a minute here): the breaker opened on refused connections.
func TestRestartedEndpointIsBackWithinProbes(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// fall 1000: the probes do not mark the endpoint down during the short
	// outage, so the refused request itself opens the breaker
	e.load(withBreaker(vllmBlock("\tprobe {\n\t\thealth_interval 50ms\n\t\tfall 1000\n\t}\n"), "self",
		"\t\tallowed_fails 1\n\t\tcooldown 1m\n"))
	a := e.selfSrv.Addr()
	opened := endpointBreaker(t, "self", a).Opened

	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	if group, reason := routeOf(t); group != "cloud" || reason != "self:connection_refused" {
		t.Fatalf("the stopped endpoint: %s (%s)", group, reason)
	}
	if b := endpointBreaker(t, "self", a); b.State != "open" || b.Opened != opened+1 {
		t.Fatalf("breaker after a refused connection: %+v", b)
	}
	if err := e.selfSrv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restarted endpoint serving again", func() bool {
		group, _ := routeOf(t)
		return group == "self"
	})
	if b := endpointBreaker(t, "self", a); b.State != "closed" {
		t.Errorf("breaker after the trial: %+v", b)
	}
}

// A replica answering 429 with Retry-After is left alone that long: the
// request goes to the other replica, and so do the next ones.
func TestRetryAfterKeepsTheEndpointOut(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	v := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{selfModel}})
	var limited atomic.Int32
	srv, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			v.ServeHTTP(w, r) // probes see a healthy vLLM
			return
		}
		limited.Add(1)
		w.Header().Set("Retry-After", "30")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"rate limited","type":"rate_limit_error","param":null,"code":429}}`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// the limited replica first: an idle tie picks it
	block := strings.Replace(vllmBlock(""), "proxy {SELF}\n", "proxy "+srv.URL()+" {SELF}\n", 1)
	block = strings.Replace(block, "target self "+selfModel+"\n", "target self "+selfModel+" {\n\t\tretries 1\n\t}\n", 1)
	e.load(block)

	for i := range 10 {
		if group, reason := routeOf(t); group != "self" {
			t.Fatalf("request %d: %s (%s)", i, group, reason)
		}
	}
	if n := limited.Load(); n != 1 {
		t.Errorf("the replica that asked for 30s got %d requests, want 1", n)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("the cloud got %d requests", n)
	}
}

// The gateway's deadline covers every attempt together: when it cuts a
// stream that was going well, the endpoint is not to blame, after the
// first byte as before it. Its breaker stays closed and the next request
// goes to it.
func TestGatewayDeadlineIsNoUpstreamFailure(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: 100 * time.Millisecond}, simulator.CloudConfig{})
	e.load("deadline 600ms\n" + withBreaker(defaultGateway, "self", "\t\tallowed_fails 1\n\t\tcooldown 1h\n"))
	long := `{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":100}`
	resp, body := post(t, "/v1/chat/completions", long)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" || !strings.Contains(string(body), "did not finish in time") {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	if b := endpointBreaker(t, "self", e.selfSrv.Addr()); b.State != "closed" {
		t.Errorf("the gateway's deadline opened the endpoint's breaker: %+v", b)
	}
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("next request: %d from %q (%s) %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
}
