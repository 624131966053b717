// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package tests holds the integration tests: a real Caddy, run in-process
// by caddytest, in front of the project's simulators on loopback. They
// share one Caddy, so they run one at a time.
package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/hybridllm/caddy-hybrid-llm"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
	"github.com/hybridllm/caddy-hybrid-llm/tests/testhome"
)

const (
	gateway    = "http://127.0.0.1:9080"
	selfModel  = "qwen2.5-7b-instruct"
	cloudModel = "gpt-4o-mini"
	cloudKey   = "sk-cloud-secret-0123456789"
	chatBody   = `{"model":"chat-main","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4,"temperature":0.2,"x_custom":{"keep":[1,2,3]}}`
)

// env is one test's upstreams: a simulated vLLM ("self") and a simulated
// cloud ("cloud"), each on its own loopback port.
type env struct {
	t        *testing.T
	self     *simulator.VLLM
	selfSrv  *simulator.Server
	cloud    *simulator.Cloud
	cloudSrv *simulator.Server
	logPath  string
	tester   *caddytest.Tester
	name     string // the gateway's, see gatewayName
}

func newEnv(t *testing.T, selfCfg simulator.VLLMConfig, cloudCfg simulator.CloudConfig) *env {
	t.Helper()
	if len(selfCfg.ServedModelNames) == 0 {
		selfCfg.ServedModelNames = []string{selfModel}
	}
	if len(cloudCfg.Models) == 0 {
		cloudCfg.Models = []string{cloudModel}
	}
	if cloudCfg.APIKey == "" {
		cloudCfg.APIKey = cloudKey
	}
	e := &env{
		t:       t,
		name:    runName(t),
		self:    simulator.NewVLLM(selfCfg),
		cloud:   simulator.NewCloud(cloudCfg),
		logPath: filepath.Join(t.TempDir(), "access.log"),
	}
	var err error
	if e.selfSrv, err = simulator.Start("127.0.0.1:0", e.self); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.selfSrv.Close() })
	if e.cloudSrv, err = simulator.Start("127.0.0.1:0", e.cloud); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cloudSrv.Close() })
	return e
}

// secondSelf starts another simulated vLLM serving the self-hosted model,
// for groups of two endpoints; it stops with the test.
func secondSelf(t *testing.T) (*simulator.VLLM, *simulator.Server) {
	t.Helper()
	return startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}})
}

// startVLLM starts a simulated vLLM; it stops with the test.
func startVLLM(t *testing.T, cfg simulator.VLLMConfig) (*simulator.VLLM, *simulator.Server) {
	t.Helper()
	v := simulator.NewVLLM(cfg)
	srv, err := simulator.Start("127.0.0.1:0", v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return v, srv
}

// defaultGateway is the hybrid_llm block most tests use: chat-main goes
// to self first and cloud second; cloud-first the other way round.
const defaultGateway = `
group self {
	kind vllm
	proxy {SELF}
	# one health probe at start: tests break the upstream themselves
	probe {
		health_interval 1m
	}
}
group cloud {
	kind openai
	api_key ` + cloudKey + `
	proxy {CLOUD}
}
alias chat-main {
	target self ` + selfModel + `
	target cloud ` + cloudModel + `
}
alias cloud-first {
	target cloud ` + cloudModel + `
	target self ` + selfModel + `
}
`

// standIn starts an upstream of the test's own on loopback, closed when
// the test ends.
func standIn(t *testing.T, h http.HandlerFunc) *simulator.Server {
	t.Helper()
	srv, err := simulator.Start("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// withPlainSelf replaces the self group of a block with one of kind
// openai (no probes, no model check) proxying to the given upstream and
// options; for tests of the generic proxy path with stand-in upstreams.
func withPlainSelf(block, proxy string) string {
	i := strings.Index(block, "group self {")
	j := i + strings.Index(block[i:], "\n}\n") + 3
	return block[:i] + "group self {\n\tkind openai\n\tmodel_check off\n\tproxy " + proxy + "\n}\n" + block[j:]
}

// load runs Caddy with the given hybrid_llm block ({SELF}, {CLOUD} and
// {LOG} are replaced with the simulators' addresses and the log path).
func (e *env) load(block string) {
	e.t.Helper()
	e.loadWithGlobal(block, "")
}

// gatewayName is the name load gives the test's gateway, so that state
// kept across reloads (breakers, overflow) does not leak between tests.
// A test run again in the same process (-count=2) gets a name of its
// own, since state kept by name (health, breakers, ledger) outlives it.
func (e *env) gatewayName() string { return e.name }

// runs counts each test's runs in this process.
var (
	runsMu sync.Mutex
	runs   = map[string]int{}
)

func runName(t *testing.T) string {
	runsMu.Lock()
	defer runsMu.Unlock()
	runs[t.Name()]++
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if n := runs[t.Name()]; n > 1 {
		name += fmt.Sprintf("-run%d", n)
	}
	return name
}

// loadWithGlobal is load with extra global options.
func (e *env) loadWithGlobal(block, global string) {
	e.t.Helper()
	e.loadSite(block, global, "")
}

// loadSite is load with extra global options, and handler directives
// that run before the gateway.
func (e *env) loadSite(block, global, before string) {
	e.t.Helper()
	if !strings.HasPrefix(block, "name ") {
		block = "name " + e.gatewayName() + "\n" + block
	}
	cfg := `{
	admin localhost:2999
	skip_install_trust
	http_port 9080
	https_port 9443
	grace_period 2s
	` + global + `
}
http://127.0.0.1:9080 {
	# as the shipped Caddyfiles do: Caddy redacts Authorization, the
	# filter the other headers a key may come in
	log {
		output file {LOG}
		format filter {
			wrap json
			request>headers hybrid_llm_keys
			request>uri hybrid_llm_keys
		}
	}
	handle /v1/* {
		` + before + `
		hybrid_llm {
` + block + `
		}
	}
	handle {
		respond "not here" 404
	}
}
`
	cfg = strings.NewReplacer("{SELF}", e.selfSrv.URL(), "{CLOUD}", e.cloudSrv.URL(), "{LOG}", e.logPath).Replace(cfg)
	e.tester = loadRaw(e.t, cfg)
	waitProbed(e.t)
}

// waitProbed waits until every vLLM endpoint has had its first health,
// models and metrics probe, so that a test that then breaks an upstream
// sees the failure it caused rather than a probe's view of it.
func waitProbed(t *testing.T) {
	t.Helper()
	waitFor(t, "the first probes", func() bool {
		for _, g := range getState(t).Gateways {
			for _, grp := range g.Groups {
				for _, ep := range grp.Endpoints {
					if ep.Health == "unknown" || ep.ServedModels == nil || ep.Metrics.AgeSeconds == nil {
						return false
					}
				}
			}
		}
		return true
	})
}

// testStorage is Caddy's storage for this run of the tests: what persists
// there (the ledger, the local CA) starts afresh with every run, so that
// -count=2 sees what one run sees.
var testStorage string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hybrid-llm-tests-")
	if err != nil {
		panic(err)
	}
	testStorage = dir
	// and off the user's own Caddy directories (the instance id, the
	// autosaved config)
	code := testhome.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// withTestStorage sets the run's storage in a Caddyfile's global options.
func withTestStorage(cfg string) string {
	storage := "\tstorage file_system {\n\t\troot " + testStorage + "\n\t}\n"
	at := 0 // the first line that is not a comment
	for _, line := range strings.SplitAfter(cfg, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			if l == "{" {
				return cfg[:at+len(line)] + storage + cfg[at+len(line):]
			}
			break
		}
		at += len(line)
	}
	return "{\n" + storage + "}\n" + cfg
}

// loadRaw runs Caddy with a whole Caddyfile.
// plainGlobals are the global options of a test's own Caddyfile: the
// test admin and HTTP ports, no trust store.
const plainGlobals = "{\n\tadmin localhost:2999\n\tskip_install_trust\n\thttp_port 9080\n\thttps_port 9443\n}\n"

func loadRaw(t *testing.T, cfg string) *caddytest.Tester {
	t.Helper()
	tc := caddytest.NewTester(t)
	tc.InitServer(withTestStorage(cfg), "caddyfile")
	// the reload closes the old server's idle keep-alive connections; a
	// POST on one of them would fail before reaching the new config
	client.CloseIdleConnections()
	return tc
}

// post sends a JSON body to the gateway.
func post(t *testing.T, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gateway+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := sendOnce(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return resp, b
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}

// sendOnce sends a request, and sends it again on a new connection when
// the kept-alive one it went out on was closed before any answer: a
// reload's old server closes its idle connections as it shuts down, and a
// connection the transport puts back into its pool just after the test's
// CloseIdleConnections may be the one. Nothing was served on it; Go's
// transport resends only idempotent requests, the SDKs resend any.
func sendOnce(req *http.Request) (*http.Response, error) {
	reused := false
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	resp, err := client.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	closed := err != nil && (errors.Is(err, io.EOF) || strings.Contains(err.Error(), "server closed idle connection"))
	if !closed || !reused || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	client.CloseIdleConnections()
	return client.Do(again)
}

// apiErr is the OpenAI error shape.
type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wantError asserts an OpenAI-shaped error with the status and code.
func wantError(t *testing.T, resp *http.Response, body []byte, status int, code string) apiErr {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	var e apiErr
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("not the OpenAI error shape: %v: %s", err, body)
	}
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("empty message or type: %s", body)
	}
	if code != "" && (e.Error.Code == nil || *e.Error.Code != code) {
		t.Errorf("code %v, want %q; body %s", e.Error.Code, code, body)
	}
	// keys are present even when null
	for _, k := range []string{`"message"`, `"type"`, `"param"`, `"code"`} {
		if !bytes.Contains(body, []byte(k)) {
			t.Errorf("error body lacks %s: %s", k, body)
		}
	}
	return e
}

// selfPosts and cloudPosts return the inference requests (POSTs) an
// upstream received; the gateway's probes and model checks are GETs.
func (e *env) selfPosts() []simulator.RecordedRequest  { return posts(e.self.Requests()) }
func (e *env) cloudPosts() []simulator.RecordedRequest { return posts(e.cloud.Requests()) }

func posts(reqs []simulator.RecordedRequest) []simulator.RecordedRequest {
	out := reqs[:0:0]
	for _, r := range reqs {
		if r.Method == http.MethodPost {
			out = append(out, r)
		}
	}
	return out
}

// models returns the model field of each request an upstream received.
func models(reqs []simulator.RecordedRequest) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		var m struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(r.Body, &m)
		out[i] = m.Model
	}
	return out
}

// waitFor polls cond until it holds, failing the test after a bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// accessLog returns the first access log entry that carries the given
// request id, the gateway's (the answer's X-Request-Id) or the one the
// client sent (llm_client_request_id), waiting (bounded) for it: Caddy
// writes the entry after the response.
func (e *env) accessLog(requestID string) map[string]any {
	e.t.Helper()
	var entry map[string]any
	waitFor(e.t, "access log entry of "+requestID, func() bool {
		f, err := os.Open(e.logPath)
		if err != nil {
			return false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && (m["request_id"] == requestID || m["llm_client_request_id"] == requestID) {
				entry = m
				return true
			}
		}
		return false
	})
	return entry
}

// resettingServer accepts connections, reads the request head and closes
// the connection without answering: a connection reset before the first
// response byte.
func resettingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			_, _ = http.ReadRequest(br)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			_ = c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

// sseEvents reads an SSE body into its data payloads.
func sseEvents(body []byte) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if p, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, p)
		}
	}
	return out
}
