// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

func adminPost(t *testing.T, path, contentType, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post("http://localhost:2999"+path, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Draining the self-hosted group under steady traffic sends every
// following request to the cloud with the cloud's model name, without a
// failure; undraining brings traffic back. The drain survives a reload.
func TestDrainUnderTraffic(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: time.Millisecond}, simulator.CloudConfig{})
	e.load(defaultGateway)
	gw := e.gatewayName()

	_, failed, stopTraffic := steadyTraffic(t, 4, func(resp *http.Response, _ []byte) bool { return resp.StatusCode == 200 })
	defer func() {
		stopTraffic()
		if n := failed.Load(); n != 0 {
			t.Errorf("%d requests failed during the drill", n)
		}
	}()

	if code, b := adminPost(t, "/hybrid_llm/drain", "application/json", `{"gateway":"`+gw+`","group":"self"}`); code != 200 {
		t.Fatalf("drain: %d %s", code, b)
	}
	selfBefore := len(e.selfPosts())
	for range 5 {
		group, reason := routeOf(t)
		if group != "cloud" || reason != "self:drained" {
			t.Errorf("while drained: %s (%s)", group, reason)
		}
	}
	// in-flight requests at the moment of the drain may still finish at
	// self; nothing new arrives there after them
	waitFor(t, "self to go quiet", func() bool { return len(e.selfPosts()) <= selfBefore+4 })
	for _, m := range models(e.cloudPosts()) {
		if m != cloudModel {
			t.Errorf("cloud received %q", m)
		}
	}
	st := getState(t)
	if !drainedIn(st, "self") {
		t.Error("the state does not show the drain")
	}

	// a reload keeps the drain
	e.load(defaultGateway + "alias extra {\n\ttarget cloud " + cloudModel + "\n}\n")
	if group, _ := routeOf(t); group != "cloud" {
		t.Errorf("after a reload the drain is gone: %s", group)
	}

	if code, b := adminPost(t, "/hybrid_llm/undrain", "application/json", `{"gateway":"`+gw+`","group":"self"}`); code != 200 {
		t.Fatalf("undrain: %d %s", code, b)
	}
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("after undrain: %s", group)
	}
}

func drainedIn(st stateDoc, group string) bool {
	for _, g := range st.Gateways {
		for _, grp := range g.Groups {
			if grp.Name == group {
				return grp.Drained
			}
		}
	}
	return false
}

func TestDrainOneEndpoint(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	second, srv := secondSelf(t)
	e.load(strings.Replace(defaultGateway, "proxy {SELF}", "proxy {SELF} "+srv.URL(), 1))
	gw := e.gatewayName()
	if code, b := adminPost(t, "/hybrid_llm/drain", "application/json", `{"gateway":"`+gw+`","group":"self","endpoint":"`+e.selfSrv.Addr()+`"}`); code != 200 {
		t.Fatalf("drain: %d %s", code, b)
	}
	before := len(e.selfPosts())
	for range 6 {
		if group, _ := routeOf(t); group != "self" {
			t.Errorf("with one endpoint drained the group still serves: %s", group)
		}
	}
	if n := len(e.selfPosts()); n != before {
		t.Errorf("the drained endpoint got %d requests", n-before)
	}
	if n := len(posts(second.Requests())); n != 6 {
		t.Errorf("the other endpoint got %d of 6", n)
	}
	// undraining the group leaves the endpoint's own drain, and says so
	code, b := adminPost(t, "/hybrid_llm/undrain", "application/json", `{"gateway":"`+gw+`","group":"self"}`)
	if code != 200 || !strings.Contains(string(b), `"endpoints_still_drained":["`+e.selfSrv.Addr()+`"]`) {
		t.Errorf("group undrain: %d %s", code, b)
	}
	_, _ = adminPost(t, "/hybrid_llm/undrain", "application/json", `{"gateway":"`+gw+`","group":"self","endpoint":"`+e.selfSrv.Addr()+`"}`)
}

func TestAdminRoutesRefuseBadRequests(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	gw := e.gatewayName()
	for _, tc := range []struct {
		path, ct, body string
		want           int
		says           string // what the error names
	}{
		{"/hybrid_llm/drain", "text/plain", `{"gateway":"` + gw + `","group":"self"}`, http.StatusUnsupportedMediaType, ""},
		{"/hybrid_llm/drain", "application/json", `{"gateway":"` + gw + `","group":"nope"}`, http.StatusNotFound, `has no group \"nope\"; its groups: cloud, self`},
		{"/hybrid_llm/drain", "application/json", `{"gateway":"nope","group":"self"}`, http.StatusNotFound, `no gateway named \"nope\"; running: ` + gw},
		{"/hybrid_llm/drain", "application/json", `{"gateway":"` + gw + `","group":"cloud","endpoint":"x:1"}`, http.StatusBadRequest, ""},
		{"/hybrid_llm/drain", "application/json", `{"gateway":"` + gw + `","grop":"self"}`, http.StatusBadRequest, ""},
		{"/hybrid_llm/drain", "application/json", `{}`, http.StatusBadRequest, `name the group: {\"group\":\"self\"}`},
		{"/hybrid_llm/drain", "application/json", `{"group":"self","endpoint":"10.9.9.9:1"}`, http.StatusNotFound, `has no endpoint \"10.9.9.9:1\"; its endpoints: ` + e.selfSrv.Addr()},
		{"/hybrid_llm/drill", "application/json", `{"gateway":"` + gw + `","alias":"nope"}`, http.StatusNotFound, `has no alias \"nope\"; its aliases: chat-main`},
	} {
		if code, b := adminPost(t, tc.path, tc.ct, tc.body); code != tc.want || !strings.Contains(string(b), tc.says) {
			t.Errorf("%s %s %s: %d %s, want %d saying %q", tc.path, tc.ct, tc.body, code, b, tc.want, tc.says)
		}
	}
	// a gateway named in a query that is not running is an error that
	// names those that are, never a silent "everything"
	for _, path := range []string{"/hybrid_llm/state", "/hybrid_llm/ledger", "/hybrid_llm/clients"} {
		resp, err := http.Get("http://localhost:2999" + path + "?gateway=nosuch")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `no gateway named \"nosuch\"; running: `+gw) {
			t.Errorf("%s?gateway=nosuch: %d %s", path, resp.StatusCode, b)
		}
	}
	var st stateDoc
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state?gateway="+gw), &st); err != nil || len(st.Gateways) != 1 {
		t.Errorf("the state of one gateway: %v %+v", err, st)
	}
	resp, err := http.Get("http://localhost:2999/hybrid_llm/drain")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET drain: %d", resp.StatusCode)
		}
	}
	if group, _ := routeOf(t); group != "self" {
		t.Errorf("a refused drain changed routing: %s", group)
	}
}

// The drill reports each target; a wrong cloud model name fails with the
// cloud's own 404 message, on an ordinary day.
func TestDrillReportsWrongCloudModel(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "target cloud "+cloudModel+"\n}\nalias cloud-first", "target cloud gpt-4o-typo\n}\nalias cloud-first", 1))
	code, b := adminPost(t, "/hybrid_llm/drill", "application/json", `{"gateway":"`+e.gatewayName()+`","alias":"chat-main"}`)
	if code != 200 {
		t.Fatalf("drill: %d %s", code, b)
	}
	var out struct {
		Targets []struct {
			Group, Model, Error string
			Reachable, OK       bool
			Status              int
			AnsweredModel       string `json:"answered_model"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Targets) != 2 {
		t.Fatalf("%v %s", err, b)
	}
	self, cloud := out.Targets[0], out.Targets[1]
	if !self.OK || self.Status != 200 || self.AnsweredModel != selfModel {
		t.Errorf("self: %+v", self)
	}
	if cloud.OK || !cloud.Reachable || cloud.Status != 404 || !strings.Contains(cloud.Error, "gpt-4o-typo") || !strings.Contains(cloud.Error, "does not exist") {
		t.Errorf("cloud: %+v", cloud)
	}
	if strings.Contains(string(b), cloudKey) {
		t.Error("the drill report holds the cloud key")
	}
}

// The drill tests every endpoint of every target: with one of two vLLM
// replicas dead, the admin API reports the dead one as failed (and the
// target and the drill with it) and the live one as ok, and the CLI's
// table says the same and exits non-zero. A group of kind openai is drilled
// endpoint by endpoint too, whatever its policy (first would send every
// drill to the live one).
func TestDrillReportsDeadReplica(t *testing.T) {
	t.Run("vllm", func(t *testing.T) {
		testDrillReportsDeadReplica(t, func(second string) string {
			return strings.Replace(defaultGateway, "proxy {SELF}", "proxy {SELF} "+second, 1)
		})
	})
	t.Run("openai", func(t *testing.T) {
		testDrillReportsDeadReplica(t, func(second string) string {
			return withPlainSelf(defaultGateway, "{SELF} "+second+" {\n\t\tlb_policy first\n\t}")
		})
	})
}

func testDrillReportsDeadReplica(t *testing.T, block func(second string) string) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	_, srv := secondSelf(t)
	e.load(block(srv.URL()))
	live, dead := e.selfSrv.Addr(), srv.Addr()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	code, b := adminPost(t, "/hybrid_llm/drill", "application/json", `{"gateway":"`+e.gatewayName()+`","alias":"chat-main"}`)
	if code != 200 {
		t.Fatalf("drill: %d %s", code, b)
	}
	type answer struct {
		Address, Error string
		Reachable, OK  bool
		Status         int
		AnsweredModel  string `json:"answered_model"`
	}
	var out struct {
		Targets []struct {
			Group     string
			OK        bool
			Error     string
			Endpoints []answer
		} `json:"targets"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Targets) != 2 {
		t.Fatalf("%v %s", err, b)
	}
	self, cloud := out.Targets[0], out.Targets[1]
	if self.Group != "self" || self.OK || !strings.Contains(self.Error, dead) || len(self.Endpoints) != 2 {
		t.Fatalf("self: %s", b)
	}
	got := map[string]answer{}
	for _, ep := range self.Endpoints {
		got[ep.Address] = ep
	}
	if a := got[live]; !a.OK || a.Status != 200 || a.AnsweredModel != selfModel {
		t.Errorf("the live replica %s: %+v", live, a)
	}
	if a := got[dead]; a.OK || a.Reachable || a.Error == "" {
		t.Errorf("the dead replica %s: %+v", dead, a)
	}
	if !cloud.OK || len(cloud.Endpoints) != 1 || !cloud.Endpoints[0].OK {
		t.Errorf("cloud: %s", b)
	}

	stdout, err := runCLI(t, "drill", "--alias", "chat-main", "--gateway", e.gatewayName())
	if err == nil || !strings.Contains(err.Error(), "1 of 2 targets failed") {
		t.Errorf("the CLI's drill: %v", err)
	}
	var deadLine, liveLine bool
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 3 && f[2] == dead:
			deadLine = f[3] == "FAILED"
		case len(f) > 3 && f[2] == live:
			liveLine = f[3] == "ok"
		}
	}
	if !deadLine || !liveLine {
		t.Errorf("the CLI's table: want %s FAILED and %s ok:\n%s", dead, live, stdout)
	}
}

// runCLI runs `caddy hybrid-llm` against the tests' admin listener and
// returns what it printed.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	def, ok := caddycmd.Commands()["hybrid-llm"]
	if !ok {
		t.Fatal("the hybrid-llm command is not registered")
	}
	cmd := &cobra.Command{Use: def.Name, SilenceUsage: true, SilenceErrors: true}
	def.CobraFunc(cmd)
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append(args, "--address", "localhost:2999"))
	err := cmd.Execute()
	return stdout.String(), err
}

// replayablePost posts a chat request the way a production client does
// (the OpenAI SDKs retry connection errors twice by default): a
// connection error before any response (a reload closed the keep-alive
// connection the request went out on, so the gateway never got it) is
// retried. Any response, good or bad, is returned as it is.
func replayablePost(body string) (*http.Response, error) {
	var err error
	for range 3 {
		var req *http.Request
		req, err = http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", strconv.FormatInt(idem.Add(1), 10))
		var resp *http.Response
		if resp, err = client.Do(req); err == nil {
			return resp, nil
		}
		connRetries.Add(1)
	}
	return nil, err
}

var connRetries atomic.Int64

var idem atomic.Int64

// Reloading the config five times, each time changed, while 50 streams
// and steady non-streamed traffic are in flight loses and truncates
// nothing; the counters keep counting.
func TestReloadUnderLoad(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{MaxNumSeqs: 64, ITL: 10 * time.Millisecond}, simulator.CloudConfig{ITL: 10 * time.Millisecond})
	e.load(defaultGateway)
	labels := map[string]string{"gateway": e.gatewayName(), "alias": "chat-main"}
	before := metricValue(t, "caddy_hybrid_llm_requests_total", labels)

	streamReq := strings.Replace(streamBody, `"max_tokens":5`, `"max_tokens":100`, 1)
	var wg sync.WaitGroup
	var bad, streams atomic.Int64
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := replayablePost(streamReq)
			if err != nil {
				t.Logf("stream: %v", err)
				bad.Add(1)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			ev := sseEvents(b)
			if err != nil || resp.StatusCode != 200 || len(ev) != 100+2 || ev[len(ev)-1] != "[DONE]" {
				t.Logf("stream: %d %v, %d events", resp.StatusCode, err, len(ev))
				bad.Add(1)
				return
			}
			streams.Add(1)
		}()
	}
	plain, plainBad, stopTraffic := steadyTraffic(t, 4, func(resp *http.Response, b []byte) bool {
		return resp.StatusCode == 200 && strings.Contains(string(b), `"usage"`)
	})
	// the reloads come while the streams are running
	waitFor(t, "the streams to run", func() bool { r, _ := e.self.Load(); return r >= 40 })
	modelProbes := func() int {
		n := 0
		for _, r := range e.self.Requests() {
			if r.Method == http.MethodGet && r.Path == "/v1/models" {
				n++
			}
		}
		return n
	}
	probesBefore := modelProbes()
	for i := range 5 {
		waitFor(t, "traffic between reloads", func() bool { return plain.Load() >= int64(5*(i+1)) })
		e.load(defaultGateway + "alias reload-" + strconv.Itoa(i) + " {\n\ttarget cloud " + cloudModel + "\n}\n")
	}
	stopTraffic()
	wg.Wait()
	if n := bad.Load() + plainBad.Load(); n != 0 {
		t.Errorf("%d responses failed or were truncated across 5 reloads", n)
	}
	t.Logf("%d streams, %d requests answered; %d connection errors before a response were retried", streams.Load(), plain.Load(), connRetries.Load())
	// the unchanged upstream kept its prober: no model probe per reload
	if n := modelProbes() - probesBefore; n > 0 {
		t.Errorf("%d /v1/models probes during 5 reloads of an unchanged upstream", n)
	}
	if streams.Load() != 50 {
		t.Errorf("%d of 50 streams completed", streams.Load())
	}
	after := metricValue(t, "caddy_hybrid_llm_requests_total", labels)
	if after-before != float64(streams.Load()+plain.Load()) {
		t.Errorf("requests_total grew by %v, %d requests answered", after-before, streams.Load()+plain.Load())
	}
	// nothing leaked: no request is in flight any more
	waitNoInFlight(t)
}

// steadyTraffic keeps workers sending chat requests until stopped, and
// counts the answers ok accepts and the rest (a connection error after the
// client's retries counts as bad). stop waits for the workers.
func steadyTraffic(t *testing.T, workers int, ok func(*http.Response, []byte) bool) (good, bad *atomic.Int64, stop func()) {
	good, bad = new(atomic.Int64), new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				resp, err := replayablePost(chatBody)
				if err != nil {
					t.Logf("request: %v", err)
					bad.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !ok(resp, b) {
					t.Logf("request: %d %s", resp.StatusCode, b)
					bad.Add(1)
					continue
				}
				good.Add(1)
			}
		}()
	}
	return good, bad, func() {
		close(done)
		wg.Wait()
	}
}
