// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

func TestAliasGoesToFirstTargetWithItsModelName(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)

	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Hybrid-Target"); got != "self" {
		t.Errorf("X-Hybrid-Target %q, want self", got)
	}
	if got, ok := resp.Header["X-Hybrid-Model"]; ok {
		t.Errorf("X-Hybrid-Model %q: a served model name reached the client", got)
	}
	if got, ok := resp.Header["X-Hybrid-Fallback"]; ok {
		t.Errorf("X-Hybrid-Fallback %q without a fallback", got)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	// the answer names the alias, not where it landed
	if err := json.Unmarshal(body, &out); err != nil || out.Model != "chat-main" || len(out.Choices) != 1 {
		t.Fatalf("answer %s (%v)", body, err)
	}

	reqs := e.selfPosts()
	if len(reqs) != 1 {
		t.Fatalf("self got %d requests", len(reqs))
	}
	// exactly the client's bytes, with only the model swapped
	want := strings.Replace(chatBody, `"model":"chat-main"`, `"model":"`+selfModel+`"`, 1)
	if string(reqs[0].Body) != want {
		t.Errorf("self received\n%s\nwant\n%s", reqs[0].Body, want)
	}
	if reqs[0].Path != "/v1/chat/completions" {
		t.Errorf("path %q", reqs[0].Path)
	}
	if n := len(e.cloudPosts()); n != 0 {
		t.Errorf("cloud got %d requests", n)
	}
}

func TestFallbackSwapsModelName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(e *env)
		block  string
		reason string
	}{
		{
			name:   "connection refused",
			break_: func(e *env) { _ = e.selfSrv.Refuse() },
			reason: "self:connection_refused",
		},
		{
			name:   "503",
			break_: func(e *env) { e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503}) },
			reason: "self:http_503",
		},
		{
			name:   "500",
			break_: func(e *env) { e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 500}) },
			reason: "self:http_500",
		},
		{
			name:   "429",
			break_: func(e *env) { e.self.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 429}) },
			reason: "self:http_429",
		},
		{
			name:   "target timeout",
			break_: func(e *env) { e.self.SetFailures(simulator.Failures{Stall: 20 * time.Second}) },
			block: strings.Replace(defaultGateway, "target self "+selfModel+"\n",
				"target self "+selfModel+" {\ntimeout 300ms\n}\n", 1),
			reason: "self:timeout",
		},
		{
			name: "connection reset",
			// an openai group: a vLLM group's probes would find the
			// resetting server down before the request does
			block:  withPlainSelf(defaultGateway, "{RESET}"),
			reason: "self:connection_reset",
		},
		{
			name: "no endpoint available",
			// one request at a time to self; a stalled one holds it
			block: withPlainSelf(defaultGateway, "{SELF} {\nunhealthy_request_count 1\n}"),
			break_: func(e *env) {
				e.self.SetFailures(simulator.Failures{Stall: 20 * time.Second})
				go func() {
					req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(chatBody))
					req.Header.Set("Content-Type", "application/json")
					c := &http.Client{Timeout: 3 * time.Second}
					if resp, err := c.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
				waitFor(e.t, "the held request to reach self", func() bool { return len(e.selfPosts()) == 1 })
				e.self.ResetRequests()
			},
			reason: "self:no_endpoint",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
			block := tc.block
			if block == "" {
				block = defaultGateway
			}
			if strings.Contains(block, "{RESET}") {
				block = strings.Replace(block, "{RESET}", resettingServer(t), 1)
			}
			e.load(block)
			if tc.break_ != nil {
				tc.break_(e)
			}

			resp, body := post(t, "/v1/chat/completions", chatBody)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("X-Hybrid-Target"); got != "cloud" {
				t.Errorf("X-Hybrid-Target %q, want cloud", got)
			}
			if got := resp.Header.Get("X-Hybrid-Fallback"); got != "true" {
				t.Errorf("X-Hybrid-Fallback %q, want true", got)
			}
			if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != tc.reason {
				t.Errorf("X-Hybrid-Fallback-Reason %q, want %q", got, tc.reason)
			}
			if !strings.Contains(string(body), `"content":"`) {
				t.Errorf("answer not from the cloud model: %s", body)
			}
			// the cloud got its own model name, never the self-hosted one
			want := strings.Replace(chatBody, `"model":"chat-main"`, `"model":"`+cloudModel+`"`, 1)
			reqs := e.cloudPosts()
			if len(reqs) != 1 || string(reqs[0].Body) != want {
				t.Fatalf("cloud received %d requests: %v", len(reqs), models(reqs))
			}
			for _, m := range models(e.selfPosts()) {
				if m != selfModel {
					t.Errorf("self received model %q", m)
				}
			}
		})
	}
}

// A failed attempt's response headers must not reach the client: the
// cloud's 429 carries Retry-After, the answer from self must not.
func TestFallbackDiscardsFailedAttemptHeaders(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{RateLimit: 1, Clock: func() time.Time { return time.Unix(1000, 0) }})
	e.load(defaultGateway)

	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1))
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("first request: %d %s %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	// same second on the cloud's clock: rate limited
	resp, body = post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Hybrid-Fallback-Reason"); got != "cloud:http_429" {
		t.Errorf("reason %q", got)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		t.Errorf("the failed attempt's Retry-After leaked: %q", ra)
	}
	if n := len(resp.Header.Values("Content-Length")); n > 1 {
		t.Errorf("%d Content-Length headers", n)
	}
	if got := models(e.selfPosts()); len(got) != 1 || got[0] != selfModel {
		t.Errorf("self received %v", got)
	}
}

func TestEveryEndpointKindIsRouted(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	for _, tc := range []struct{ path, body, object string }{
		{"/v1/completions", `{"model":"chat-main","prompt":"Once upon","max_tokens":3}`, "text_completion"},
		{"/v1/embeddings", `{"model":"chat-main","input":"hello"}`, "list"},
	} {
		resp, body := post(t, tc.path, tc.body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"object":"`+tc.object+`"`) {
			t.Errorf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
	}
	reqs := e.selfPosts()
	if len(reqs) != 2 || reqs[0].Path != "/v1/completions" || reqs[1].Path != "/v1/embeddings" {
		t.Fatalf("self got %d requests", len(reqs))
	}
	for _, m := range models(reqs) {
		if m != selfModel {
			t.Errorf("self received model %q", m)
		}
	}
}

func TestCredentialIsolation(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{APIKey: "sk-self-key"}, simulator.CloudConfig{})
	block := strings.Replace(defaultGateway, "kind vllm\n", "kind vllm\napi_key sk-self-key\n", 1)
	e.load(block)

	hdrs := []string{"Authorization", "Bearer client-secret-token", "X-Api-Key", "client-x-key", "Api-Key", "client-azure-key",
		"Cookie", "session=client-cookie", "OpenAI-Organization", "org-client", "OpenAI-Project", "proj-client"}
	resp, body := post(t, "/v1/chat/completions", chatBody, hdrs...)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	_ = e.selfSrv.Refuse()
	resp, body = post(t, "/v1/chat/completions", chatBody, hdrs...)
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}

	check := func(who string, reqs []simulator.RecordedRequest, wantAuth string) {
		if len(reqs) != 1 {
			t.Fatalf("%s got %d requests", who, len(reqs))
		}
		h := reqs[0].Header
		if got := h.Values("Authorization"); len(got) != 1 || got[0] != wantAuth {
			t.Errorf("%s received Authorization %q, want %q", who, got, wantAuth)
		}
		for _, k := range []string{"X-Api-Key", "Api-Key", "Cookie", "OpenAI-Organization", "OpenAI-Project"} {
			if v := h.Get(k); v != "" {
				t.Errorf("%s received the client's %s %q", who, k, v)
			}
		}
	}
	check("self", e.selfPosts(), "Bearer sk-self-key")
	check("cloud", e.cloudPosts(), "Bearer "+cloudKey)

	entry := e.accessLog(resp.Header.Get("X-Request-Id"))
	raw, _ := json.Marshal(entry)
	for _, secret := range []string{cloudKey, "sk-self-key", "client-secret-token"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("access log contains a secret %q: %s", secret, raw)
		}
	}
}

// A route rule may match on a header of a credential's name, which never
// goes upstream: the rule reads it as the client sent it, the upstream
// does not get it.
func TestRouteRuleOnADroppedHeader(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	block := strings.Replace(defaultGateway, "\ttarget cloud "+cloudModel+"\n}\nalias cloud-first",
		"\ttarget cloud "+cloudModel+"\n\troute cloud {\n\t\theader X-Tenant-Token gold\n\t}\n}\nalias cloud-first", 1)
	if block == defaultGateway {
		t.Fatal("the default gateway changed shape")
	}
	e.load(block)
	resp, body := post(t, "/v1/chat/completions", chatBody, "X-Tenant-Token", "gold")
	if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Fatalf("%d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	for _, r := range append(e.selfPosts(), e.cloudPosts()...) {
		if v := r.Header.Get("X-Tenant-Token"); v != "" {
			t.Errorf("the upstream got X-Tenant-Token %q", v)
		}
	}
}

// A request id a client sends is its own: two clients sending the same
// one get two ids of the gateway's, in their answers, upstream and in the
// access log, where the client's is kept as llm_client_request_id.
func TestRequestID(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)

	const victim = "VICTIM-REQ-0001"
	var ids []string
	for range 2 {
		resp, body := post(t, "/v1/chat/completions", chatBody, "X-Request-Id", victim)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	resp, _ := post(t, "/v1/chat/completions", chatBody)
	ids = append(ids, resp.Header.Get("X-Request-Id"))
	if ids[0] == "" || ids[0] == victim || ids[1] == victim || ids[0] == ids[1] || ids[2] == "" || ids[2] == ids[0] {
		t.Fatalf("answered ids %q", ids)
	}
	reqs := e.selfPosts()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != ids[i] {
			t.Errorf("request %d reached the upstream with X-Request-Id %q, want the gateway's %q", i, got, ids[i])
		}
	}
	for i, id := range ids {
		entry := e.accessLog(id)
		want := any(victim)
		if i == 2 {
			want = nil
		}
		if entry["request_id"] != id || entry["llm_client_request_id"] != want {
			t.Errorf("access log of %s: request_id %v, llm_client_request_id %v", id, entry["request_id"], entry["llm_client_request_id"])
		}
	}
}

func TestRouteHeadersOff(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load("route_headers off\n" + defaultGateway)
	resp, _ := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "X-Hybrid-") {
			t.Errorf("header %s sent with route_headers off", k)
		}
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("X-Request-Id must stay")
	}
}

func TestAccessLogRecordsTheRoute(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)

	// a request answered by its first target has a short record: the
	// fields of a stream, a fallback, an overflow are left out
	if resp, body := post(t, "/v1/chat/completions", chatBody, "X-Request-Id", "log-me-0"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	first := e.accessLog("log-me-0")
	if first["llm_group"] != "self" || first["llm_outcome"] != "ok" || first["llm_endpoint"] != e.selfSrv.Addr() {
		t.Errorf("first target's record: %v", first)
	}
	for _, k := range []string{"llm_stream", "llm_tried", "llm_attempts", "llm_fallback", "llm_fallback_reason", "llm_overflow"} {
		if v, ok := first[k]; ok {
			t.Errorf("first target's record has %s = %v", k, v)
		}
	}

	_ = e.selfSrv.Refuse()
	resp, body := post(t, "/v1/chat/completions", chatBody, "X-Request-Id", "log-me-1", "Accept-Encoding", "gzip, br")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	entry := e.accessLog("log-me-1")
	want := map[string]any{
		"llm_alias":    "chat-main",
		"llm_group":    "cloud",
		"llm_model":    cloudModel,
		"llm_endpoint": e.cloudSrv.Addr(),
		"llm_attempts": float64(2),
		"llm_fallback": true,
		"llm_outcome":  "ok",
	}
	for k, v := range want {
		if entry[k] != v {
			t.Errorf("%s = %v, want %v", k, entry[k], v)
		}
	}
	// refused, or reset: the gateway's keep-alive connection from the
	// first request may meet the upstream's close before the pool sees it
	reason, _ := entry["llm_fallback_reason"].(string)
	if reason != "connection_refused" && reason != "connection_reset" {
		t.Errorf("llm_fallback_reason = %v, want connection_refused (or connection_reset)", entry["llm_fallback_reason"])
	}
	// the client's Accept-Encoding is kept from the upstreams, not from the log
	if req, _ := entry["request"].(map[string]any); req == nil || fmt.Sprint(req["headers"].(map[string]any)["Accept-Encoding"]) != "[gzip, br]" {
		t.Errorf("the access log's request: %v", entry["request"])
	}
	if tried, _ := entry["llm_tried"].([]any); len(tried) != 1 || tried[0] != "self:"+reason {
		t.Errorf("llm_tried = %v", entry["llm_tried"])
	}
	if ttfb, _ := entry["llm_ttfb"].(float64); ttfb <= 0 {
		t.Errorf("llm_ttfb = %v", entry["llm_ttfb"])
	}
	for _, k := range []string{"llm_prompt_tokens", "llm_completion_tokens"} {
		if n, _ := entry[k].(float64); n <= 0 {
			t.Errorf("%s = %v", k, entry[k])
		}
	}
	if _, ok := entry["llm_cost_usd"]; ok {
		t.Error("llm_cost_usd logged without a cost block")
	}
}

func TestModelsListsAliasesOnly(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)

	req, _ := http.NewRequest(http.MethodGet, gateway+"/v1/models", nil)
	resp, body := do(t, req)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object string
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 2 || list.Data[0].ID != "chat-main" || list.Data[1].ID != "cloud-first" || list.Data[0].Object != "model" {
		t.Errorf("list %s", body)
	}
	if strings.Contains(string(body), selfModel) || strings.Contains(string(body), cloudModel) {
		t.Errorf("upstream model names listed: %s", body)
	}

	req, _ = http.NewRequest(http.MethodGet, gateway+"/v1/models/chat-main", nil)
	resp, body = do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"chat-main"`) {
		t.Errorf("retrieve: %d %s", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodGet, gateway+"/v1/models/"+selfModel, nil)
	resp, body = do(t, req)
	wantError(t, resp, body, http.StatusNotFound, "model_not_found")
	if n := len(e.selfPosts()) + len(e.cloudPosts()); n != 0 {
		t.Errorf("upstreams got %d requests", n)
	}
}

// An upstream's own request id (clouds send theirs) must not replace the
// gateway's; it is kept as X-Upstream-Request-Id.
func TestUpstreamRequestIDKeptSeparately(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	own, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_cloud_777")
		w.Header().Set("X-Upstream-Request-Id", "req_edge_1") // the upstream's own upstream's
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"chat.completion","model":"` + selfModel + `","choices":[]}`))
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	e.load(withPlainSelf(defaultGateway, own.URL()))

	resp, body := post(t, "/v1/chat/completions", chatBody, "X-Request-Id", "mine-1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] == "mine-1" || got[0] == "req_cloud_777" || got[0] == "" {
		t.Errorf("X-Request-Id %q", got)
	}
	if got := resp.Header.Values("X-Upstream-Request-Id"); len(got) != 1 || got[0] != "req_cloud_777" {
		t.Errorf("X-Upstream-Request-Id %q", got)
	}
}
