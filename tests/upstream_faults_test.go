// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// loadWithGatewayLog loads a block with the gateway's own log (not the access
// log) written as JSON to a file, whose path it returns.
func (e *env) loadWithGatewayLog(block string) string {
	e.t.Helper()
	logPath := filepath.Join(e.t.TempDir(), "gateway.log")
	e.loadWithGlobal(block, "log gateway {\n\t\toutput file "+logPath+"\n\t\tformat json\n\t\tinclude http.handlers.hybrid_llm\n\t}")
	return logPath
}

// logLines counts the lines of a log file that contain every one of want.
func logLines(t *testing.T, path string, want ...string) int {
	t.Helper()
	b, _ := os.ReadFile(path)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		all := line != ""
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

// fallbacks reads the fallback counter of chat-main from a group, by
// reason.
func fallbacks(t *testing.T, gw, from, reason string) float64 {
	t.Helper()
	return metricValue(t, "caddy_hybrid_llm_fallbacks_total", map[string]string{"gateway": gw, "alias": "chat-main", "from": from, "reason": reason})
}

// A self-hosted vLLM whose --api-key was rotated answers the gateway 401:
// the gateway's configuration is at fault, not the client's key, so the
// request falls back to the cloud, the fallback is counted with reason
// upstream_auth, and the error is logged once, not once per request.
func TestUpstreamAuthFailureFallsBack(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := strings.Replace(defaultGateway, "\tkind vllm\n", "\tkind vllm\n\tapi_key old-vllm-key\n", 1)
	logPath := e.loadWithGatewayLog(block)
	gw := e.gatewayName()
	// the key is rotated once the probes have seen the endpoint
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusUnauthorized})
	before := fallbacks(t, gw, "self", "upstream_auth")

	for i := range 3 {
		resp, body := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "cloud" {
			t.Fatalf("request %d: %d from %q: %s", i, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
		if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != "self:upstream_auth" {
			t.Errorf("request %d: fallback reason %q", i, got)
		}
	}
	if n := len(e.selfPosts()); n != 3 {
		t.Errorf("self got %d requests, want 3", n)
	}
	if got := fallbacks(t, gw, "self", "upstream_auth") - before; got != 3 {
		t.Errorf("fallbacks with reason upstream_auth: %v, want 3", got)
	}
	waitFor(t, "the error log line", func() bool {
		return logLines(t, logPath, `"level":"error"`, "refused the gateway's credentials") > 0
	})
	if n := logLines(t, logPath, `"level":"error"`, "refused the gateway's credentials", e.selfSrv.Addr()); n != 1 {
		t.Errorf("%d error lines for one broken key, want 1", n)
	}
	if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "vllm-key") {
		t.Error("the log holds a key")
	}
}

// When every target refuses the gateway's key, the client gets the
// gateway's own 502 naming the alias: no upstream's 401 (which an SDK
// would report as the caller's bad key), no upstream model name, and
// x-should-retry: false, since a retry meets the same keys.
func TestAllTargetsRefuseTheGatewaysKey(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{APIKey: "sk-rotated-cloud-key-0000"})
	e.load(defaultGateway)
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusUnauthorized})

	resp, body := post(t, "/v1/chat/completions", chatBody)
	got := wantError(t, resp, body, http.StatusBadGateway, "all_targets_failed")
	if !strings.Contains(got.Error.Message, "`chat-main`") || !strings.Contains(got.Error.Message, "self (upstream_auth), cloud (upstream_auth)") {
		t.Errorf("message %q", got.Error.Message)
	}
	for _, leak := range []string{selfModel, cloudModel, "Unauthorized", "Incorrect API key", "sk-"} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the answer holds %q: %s", leak, body)
		}
	}
	if v := resp.Header.Get("X-Should-Retry"); v != "false" {
		t.Errorf("x-should-retry %q, want false", v)
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		t.Errorf("Retry-After %q on an answer no retry can change", v)
	}
	if v := resp.Header.Get("X-Hybrid-Model"); v != "" {
		t.Errorf("X-Hybrid-Model %q", v)
	}
}

// A vLLM endpoint that answers "The model `x` does not exist." is marked
// misconfigured for that name at once, and its /v1/models probe is run
// at once to confirm or clear the mark: a passing blip clears, a real
// rename keeps it out (reason misconfigured) without another request
// reaching it. Each change of state is logged once.
func TestModelNotFoundMarksTheEndpointMisconfigured(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// only a woken /v1/models probe can run during the test
	block := strings.Replace(defaultGateway, "\t\thealth_interval 1m\n", "\t\thealth_interval 1m\n\t\tmodels_interval 1h\n", 1)
	logPath := e.loadWithGatewayLog(block)
	gw := e.gatewayName()
	notFound0 := fallbacks(t, gw, "self", "model_not_found")

	// a blip: one 404, while /v1/models still lists the name
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusNotFound})
	resp, body := post(t, "/v1/chat/completions", chatBody)
	e.self.SetFailures(simulator.Failures{})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:model_not_found" {
		t.Fatalf("%d from %q (%s): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
			resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	waitFor(t, "the probe to clear the mark", func() bool {
		resp, _ := post(t, "/v1/chat/completions", chatBody)
		return resp.Header.Get("X-Hybrid-Target") == "self"
	})

	// a rename: the endpoint now serves another name
	e.self.SetServedModelNames("qwen2.5-7b-instruct-awq")
	n0, misconfigured0 := len(e.selfPosts()), fallbacks(t, gw, "self", "misconfigured")
	resp, body = post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:model_not_found" {
		t.Fatalf("%d (%s): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	for i := range 3 {
		resp, body = post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:misconfigured" {
			t.Fatalf("request %d after the rename: %d (%s): %s", i, resp.StatusCode, resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
		}
	}
	if n := len(e.selfPosts()) - n0; n != 1 {
		t.Errorf("the renamed endpoint got %d requests, want 1", n)
	}
	waitFor(t, "the probe to confirm the mark", func() bool {
		doc := getState(t)
		ep := doc.Gateways[0].Groups[1].Endpoints[0]
		return slices.Equal(ep.Misconfigured, []string{selfModel}) && ep.ServedModels["qwen2.5-7b-instruct-awq"] > 0
	})
	if got := fallbacks(t, gw, "self", "model_not_found") - notFound0; got != 2 {
		t.Errorf("fallbacks with reason model_not_found: %v, want 2", got)
	}
	if got := fallbacks(t, gw, "self", "misconfigured") - misconfigured0; got != 3 {
		t.Errorf("fallbacks with reason misconfigured: %v, want 3", got)
	}
	// the blip and the rename: two errors, one recovery in between
	if n := logLines(t, logPath, `"level":"error"`, "does not serve the target's model name"); n != 2 {
		t.Errorf("%d error lines, want 2", n)
	}
	if n := logLines(t, logPath, `"level":"info"`, "answers the target again"); n != 1 {
		t.Errorf("%d recovery lines, want 1", n)
	}
}

// A cloud model name the cloud stopped listing is skipped (reason
// misconfigured) like a vLLM endpoint failing its /v1/models check: the
// request goes to the next target without a request to the cloud.
func TestCloudModelCheckRoutes(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "alias cloud-first {\n\ttarget cloud "+cloudModel, "alias cloud-first {\n\ttarget cloud gpt-4o-typo", 1))
	waitFor(t, "the model check", func() bool {
		for _, g := range getState(t).Gateways[0].Groups {
			if g.Name == "cloud" && g.ModelCheck != nil && g.ModelCheck.CheckedAt != nil {
				return true
			}
		}
		return false
	})
	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" ||
		resp.Header.Get("X-Hybrid-Fallback-Reason") != "cloud:misconfigured" {
		t.Fatalf("%d from %q (%s): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
			resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("the cloud got %d requests for a name it does not list", n)
	}
}

// fallback_on replaces the statuses that move a request on: a 409 the
// user listed falls back, a 429 the user left out reaches the client.
func TestFallbackOn(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "\ttarget self "+selfModel+"\n\ttarget cloud", "\ttarget self "+selfModel+" {\n\t\tfallback_on 409 5xx\n\t}\n\ttarget cloud", 1))

	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusConflict})
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:http_409" {
		t.Errorf("409: %d (%s): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
	}
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusTooManyRequests})
	resp, body = post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("429: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	e.self.SetFailures(simulator.Failures{})
}

// When every target's breaker is open, the gateway's 503 says when the
// nearest one may serve again (Retry-After, whole seconds), so that
// clients wait for it rather than retrying at once.
func TestRetryAfterWhenBreakersAreOpen(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := withBreaker(defaultGateway, "self", "\t\tallowed_fails 1\n\t\tcooldown 20s\n")
	block = withBreaker(block, "cloud", "\t\tallowed_fails 1\n\t\tcooldown 40s\n")
	e.load(block)
	e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusInternalServerError})
	e.cloud.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: http.StatusInternalServerError})

	resp, body := post(t, "/v1/chat/completions", chatBody)
	wantError(t, resp, body, http.StatusBadGateway, "all_targets_failed")
	if v := resp.Header.Get("X-Should-Retry"); v != "" {
		t.Errorf("x-should-retry %q after upstream 500s", v)
	}

	resp, body = post(t, "/v1/chat/completions", chatBody)
	got := wantError(t, resp, body, http.StatusServiceUnavailable, "no_target_available")
	if !strings.Contains(got.Error.Message, "self (breaker_open), cloud (breaker_open)") {
		t.Errorf("message %q", got.Error.Message)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 20 {
		t.Errorf("Retry-After %q, want whole seconds up to self's cooldown (20)", resp.Header.Get("Retry-After"))
	}
	if v := resp.Header.Get("X-Should-Retry"); v != "" {
		t.Errorf("x-should-retry %q while a retry will help", v)
	}
}

// countingTransport counts the requests a client sends.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// The official OpenAI Go SDK retries 5xx twice by default; a gateway error
// that says no retry can help reaches the caller after one attempt.
func TestSDKDoesNotRetryWhatCannotHelp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		self   simulator.VLLMConfig
		fail   int // the status self answers
		cloud  simulator.CloudConfig
		block  func(string) string
		status int
	}{
		{
			name: "every target refuses the gateway's key",
			fail: http.StatusUnauthorized, cloud: simulator.CloudConfig{APIKey: "sk-rotated-cloud-key-0000"},
			block: func(b string) string { return b }, status: http.StatusBadGateway,
		},
		{
			name: "every target misconfigured",
			self: simulator.VLLMConfig{ServedModelNames: []string{"llama-3.1-8b"}},
			block: func(b string) string {
				return strings.Replace(b, "\ttarget cloud "+cloudModel+"\n}\nalias cloud-first", "\ttarget cloud gpt-4o-typo\n}\nalias cloud-first", 1)
			},
			status: http.StatusServiceUnavailable,
		},
		{
			name: "the request is too large for every context window",
			block: func(b string) string {
				return strings.NewReplacer(
					"alias chat-main {\n\ttarget self "+selfModel+"\n\ttarget cloud "+cloudModel+"\n",
					"alias chat-main {\n\ttarget self "+selfModel+" {\n\t\tcontext_window 1\n\t}\n\ttarget cloud "+cloudModel+" {\n\t\tcontext_window 1\n\t}\n",
				).Replace(b)
			},
			status: http.StatusServiceUnavailable,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.self, tc.cloud)
			e.load(tc.block(defaultGateway))
			if tc.fail != 0 {
				e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: tc.fail})
			}
			waitFor(t, "the model check", func() bool {
				for _, g := range getState(t).Gateways[0].Groups {
					if g.Name == "cloud" && g.ModelCheck != nil && g.ModelCheck.CheckedAt != nil {
						return true
					}
				}
				return false
			})
			ct := new(countingTransport)
			sdk := openai.NewClient(
				option.WithBaseURL(gateway+"/v1/"),
				option.WithAPIKey("client-key"),
				option.WithHTTPClient(&http.Client{Transport: ct}),
			)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := sdk.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    "chat-main",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err %v", err)
			}
			if apiErr.StatusCode != tc.status || !strings.Contains(apiErr.Message, "`chat-main`") {
				t.Errorf("error %d %q", apiErr.StatusCode, apiErr.Message)
			}
			if n := ct.n.Load(); n != 1 {
				t.Errorf("the SDK sent %d requests, want 1", n)
			}
			if n := len(e.selfPosts()) + len(e.cloudPosts()); n > 2 {
				t.Errorf("the upstreams got %d requests for one call", n)
			}
		})
	}
}

// A 404 that does not say the model is missing answers a path the client
// chose (an endpoint the upstream lacks): it reaches the client as it is,
// and is no evidence against the upstream. One that names the model falls
// back even on the last target, whose client then gets the gateway's
// answer, never the upstream's model name.
func TestPlain404IsTheAnswer(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	missing := atomic.Bool{}
	upstream := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		if missing.Load() {
			fmt.Fprint(w, `{"object":"error","message":"The model `+"`"+selfModel+"`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)
			return
		}
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	})
	e.load(withBreaker(withPlainSelf(defaultGateway, upstream.URL()), "self", "\t\tallowed_fails 1\n\t\tcooldown 1h\n"))
	gw := e.gatewayName()
	cloud0 := len(e.cloudPosts())

	for range 3 {
		resp, body := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusNotFound || string(body) != `{"error":{"message":"Not Found","type":"invalid_request_error","param":null,"code":null}}` || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("a plain 404: %d from %q (%s): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
		}
	}
	if n := len(e.cloudPosts()) - cloud0; n != 0 {
		t.Errorf("the cloud got %d requests", n)
	}
	if b := groupBreaker(t, "self"); b.State != "closed" {
		t.Errorf("404s opened the breaker: %+v", b)
	}

	// without a breaker, which the missing model would open (and keep
	// open for the next run of the test)
	e.load(withPlainSelf(defaultGateway, upstream.URL()))
	missing.Store(true)
	e.cloud.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	series := map[string]string{"gateway": gw, "alias": "cloud-first", "from": "self", "reason": "model_not_found"}
	mnf0 := metricValue(t, "caddy_hybrid_llm_fallbacks_total", series)
	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1))
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), selfModel) || !strings.Contains(string(body), "cloud-first") {
		t.Errorf("the last target's missing model: %d %s", resp.StatusCode, body)
	}
	if got := metricValue(t, "caddy_hybrid_llm_fallbacks_total", series) - mnf0; got != 1 {
		t.Errorf("model_not_found fallbacks from the last target grew by %v", got)
	}
}

// An upstream closes a kept-alive connection just as the gateway sends the
// next request on it (an idle timeout, a restart): nothing was answered,
// so the request goes again on a new connection, and the client gets the
// upstream's answer, not a fallback or a reset. So too for a group whose
// proxy rebuilds the request's headers (an api_key): the upstream sees the
// request id as X-Idempotency-Key, the mark Go's transport resends by.
func TestClosedKeepAliveConnectionIsResent(t *testing.T) {
	for _, withKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("api_key %v", withKey), func(t *testing.T) {
			e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
			var (
				mu      sync.Mutex
				perConn = map[string]int{}
				closed  atomic.Int32
			)
			up := standIn(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				perConn[r.RemoteAddr]++
				n := perConn[r.RemoteAddr]
				mu.Unlock()
				body, _ := io.ReadAll(r.Body)
				if n == 2 {
					// the connection's second request is closed unanswered
					if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
						closed.Add(1)
						_ = conn.Close()
					}
					return
				}
				if !strings.Contains(string(body), `"model":"`+selfModel+`"`) {
					http.Error(w, "body not replayed whole: "+string(body), http.StatusTeapot)
					return
				}
				if id := r.Header.Get("X-Idempotency-Key"); id == "" || id != r.Header.Get("X-Request-Id") {
					http.Error(w, "X-Idempotency-Key "+id+", not the request id", http.StatusTeapot)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","model":"`+selfModel+`","choices":[{"index":0,`+
					`"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
			})
			block := withPlainSelf(defaultGateway, up.URL())
			if withKey {
				block = strings.Replace(block, "group self {\n\tkind openai\n", "group self {\n\tkind openai\n\tapi_key sk-self-key-0123\n", 1)
			}
			e.load(block)

			for i := range 4 {
				resp, body := post(t, "/v1/chat/completions", chatBody)
				if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" || resp.Header.Get("X-Hybrid-Fallback") != "" {
					t.Fatalf("request %d: %d from %q (%q): %s", i, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"),
						resp.Header.Get("X-Hybrid-Fallback-Reason"), body)
				}
			}
			if closed.Load() == 0 {
				t.Fatal("no request met a closed connection: the test proves nothing")
			}
			if n := len(e.cloudPosts()); n != 0 {
				t.Errorf("the cloud got %d requests", n)
			}
		})
	}
}

// A 400 that is the answer (the request's own fault) reaches the client in
// the OpenAI shape whatever shape the upstream gave it: vLLM's flat one
// with its numeric code becomes {"error":{...}} with a null code, and the
// served model name in its message becomes the alias. A 4xx without a body
// gets one that says its status.
func TestUpstreamBadRequestInTheOpenAIShape(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	var bodiless atomic.Bool
	upstream := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if bodiless.Load() {
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"object":"error","message":"model `+selfModel+`: temperature must be in [0, 2]","type":"BadRequestError","param":"temperature","code":400}`)
	})
	e.load(withPlainSelf(defaultGateway, upstream.URL()))
	resp, body := post(t, "/v1/chat/completions", chatBody)
	want := `{"error":{"message":"model chat-main: temperature must be in [0, 2]","type":"invalid_request_error","param":"temperature","code":null}}`
	if resp.StatusCode != http.StatusBadRequest || string(body) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	bodiless.Store(true)
	resp, body = post(t, "/v1/chat/completions", chatBody)
	want = `{"error":{"message":"Conflict","type":"invalid_request_error","param":null,"code":null}}`
	if resp.StatusCode != http.StatusConflict || string(body) != want {
		t.Errorf("a bodiless 409: %d %s", resp.StatusCode, body)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("the cloud got %d requests for the client's own error", n)
	}
}

// An upstream that answers with an HTML page (a web server or a proxy's
// login page at the group's address) is no API: the request falls back
// (reason not_an_api_answer, counted and logged as a configuration fault),
// and no byte of the page reaches the client. With no other target, the
// client gets the gateway's 502 and is told a retry will not help.
func TestHTMLPageIsNoAnswer(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	upstream := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><body>Please sign in to "+selfModel+"</body></html>")
	})
	e.load(withPlainSelf(defaultGateway, upstream.URL()))
	series := map[string]string{"gateway": e.gatewayName(), "alias": "chat-main", "from": "self", "reason": "not_an_api_answer"}
	before := metricValue(t, "caddy_hybrid_llm_fallbacks_total", series)
	for _, body := range []string{chatBody, streamBody} {
		resp, got := post(t, "/v1/chat/completions", body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "cloud" ||
			resp.Header.Get("X-Hybrid-Fallback-Reason") != "self:not_an_api_answer" || strings.Contains(string(got), "<html>") {
			t.Errorf("%d from %q (%q): %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Fallback-Reason"), got)
		}
	}
	if got := metricValue(t, "caddy_hybrid_llm_fallbacks_total", series) - before; got != 2 {
		t.Errorf("not_an_api_answer fallbacks grew by %v, want 2", got)
	}

	// the page is the only target
	e.load(strings.Replace(withPlainSelf(defaultGateway, upstream.URL()), "\ttarget cloud "+cloudModel+"\n", "", 1))
	resp, got := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Should-Retry") != "false" || strings.Contains(string(got), "<html>") {
		t.Errorf("the only target: %d x-should-retry %q: %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), got)
	}
}
