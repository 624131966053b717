// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	mediumModel = "llama-13b"
	smallModel  = "llama-7b"
)

// chainEnv is a big model (self), a medium and a small tier, each a
// simulated vLLM; degradeOpts go into the alias's degrade block.
type chainEnv struct {
	*env
	medium, small *simulator.VLLM
	block         func(degradeOpts string) string
}

func newChainEnv(t *testing.T) *chainEnv {
	t.Helper()
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	start := func(model string) (*simulator.VLLM, *simulator.Server) {
		return startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{model}})
	}
	medium, mediumSrv := start(mediumModel)
	small, smallSrv := start(smallModel)
	group := func(name, addr, probe string) string {
		return "group " + name + " {\n\tkind vllm\n\tprobe {\n\t\tmetrics_interval 100ms\n" + probe + "\t}\n\tproxy " + addr + "\n}\n"
	}
	// the big model's refusal is what a request meets however slow the
	// machine: its last metrics never go stale and its health probes never
	// take it down, so a degraded answer's reason is connection_refused
	bigProbe := "\t\tstale_after 1h\n\t\tfall 1000000\n"
	ce := &chainEnv{env: e, medium: medium, small: small}
	ce.block = func(degradeOpts string) string {
		return group("big", "{SELF}", bigProbe) + group("medium", mediumSrv.URL(), "") + group("small", smallSrv.URL(), "") +
			"alias chat-main {\n\ttarget big " + selfModel + "\n" +
			"\ttier medium " + mediumModel + " {\n\t\tquality 0.8\n\t\tmax_tokens 3\n\t\tformats json_object tools\n\t}\n" +
			"\ttier small " + smallModel + " {\n\t\tquality 0.5\n\t}\n" +
			"\tdegrade {\n" + degradeOpts + "\n\t}\n}\n"
	}
	return ce
}

func degradedCount(t *testing.T, gw, reason string) float64 {
	t.Helper()
	return metricValue(t, "caddy_hybrid_llm_degraded_total", map[string]string{"gateway": gw, "alias": "chat-main", "reason": reason})
}

// With the big model down, a smaller one answers: the answer is marked
// (headers, access log, metric), the tier's max_tokens clamps the
// request, and the big model's return ends it.
func TestDegradeWhenTheUpperTierIsDown(t *testing.T) {
	e := newChainEnv(t)
	e.load(e.block("\t\tcap off"))
	gw := e.gatewayName()
	if resp, _ := post(t, "/v1/chat/completions", chatBody); resp.Header.Get("X-Hybrid-Degraded") != "" {
		t.Fatalf("a healthy big model's answer marked degraded")
	}

	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	before := degradedCount(t, gw, "connection_refused")
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("X-Hybrid-Degraded") != "true" || h.Get("X-Hybrid-Degraded-From") != "big" ||
		h.Get("X-Hybrid-Degrade-Reason") != "connection_refused" || h.Get("X-Hybrid-Target") != "medium" {
		t.Fatalf("marking: %v", h)
	}
	if h.Get("X-Hybrid-Max-Tokens") != "3" {
		t.Errorf("X-Hybrid-Max-Tokens %q", h.Get("X-Hybrid-Max-Tokens"))
	}
	sent := posts(e.medium.Requests())
	if n := len(sent); n != 1 || gjson.GetBytes(sent[0].Body, "max_tokens").Int() != 3 || gjson.GetBytes(sent[0].Body, "model").String() != mediumModel {
		t.Fatalf("the tier got %d requests: %s", n, sent[0].Body)
	}
	if !strings.Contains(string(sent[0].Body), `"x_custom":{"keep":[1,2,3]}`) {
		t.Errorf("the clamp lost a field: %s", sent[0].Body)
	}
	if d := degradedCount(t, gw, "connection_refused") - before; d != 1 {
		t.Errorf("degraded_total moved by %v", d)
	}
	entry := e.accessLog(h.Get("X-Request-Id"))
	if entry["llm_degraded"] != true || entry["llm_degraded_from"] != "big" || entry["llm_degrade_reason"] != "connection_refused" {
		t.Errorf("access log: %v", entry)
	}
	// a repeated max_tokens would let the upstream read another than the
	// tier's clamp: refused
	twice := strings.Replace(chatBody, `"max_tokens":4`, `"max_tokens":4,"max_tokens":5000`, 1)
	resp2, body2 := post(t, "/v1/chat/completions", twice)
	wantError(t, resp2, body2, http.StatusBadRequest, "invalid_json")
	// the body is not marked without mark_body
	if gjson.GetBytes(body, "degraded").Exists() {
		t.Errorf("marked in the body: %s", body)
	}

	if err := e.selfSrv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the big model back", func() bool {
		resp, _ := post(t, "/v1/chat/completions", chatBody)
		return resp.Header.Get("X-Hybrid-Target") == "big" && resp.Header.Get("X-Hybrid-Degraded") == ""
	})
}

// A request that needs a structured output goes only to the tiers that
// declare it; when none does, a clear 503 says so, never a broken answer.
func TestDegradeOnlyToTiersThatProduceTheFormat(t *testing.T) {
	e := newChainEnv(t)
	e.load(e.block("\t\tcap off"))
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	withField := func(field string) string {
		return strings.Replace(chatBody, `"max_tokens":4`, `"max_tokens":4,`+field, 1)
	}
	smallBefore := len(posts(e.small.Requests()))
	for _, field := range []string{`"response_format":{"type":"json_object"}`,
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`} {
		resp, body := post(t, "/v1/chat/completions", withField(field))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "medium" {
			t.Errorf("%s: %d from %q: %s", field, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
	}
	// the medium tier down: json_object has nowhere to go, plain text does
	e.medium.SetHealthy(false)
	e.medium.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	resp, body := post(t, "/v1/chat/completions", withField(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}`))
	apiErr := wantError(t, resp, body, http.StatusServiceUnavailable, "degraded_format_unsupported")
	if !strings.Contains(apiErr.Error.Message, "json_schema") || !strings.Contains(apiErr.Error.Message, "chat-main") ||
		strings.Contains(apiErr.Error.Message, mediumModel) || strings.Contains(apiErr.Error.Message, smallModel) {
		t.Errorf("message %q", apiErr.Error.Message)
	}
	if n := len(posts(e.small.Requests())) - smallBefore; n != 0 {
		t.Errorf("the small tier, which declares no format, got %d structured requests", n)
	}
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "small" {
		t.Errorf("plain text: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	// tools it may not call need no tool calls
	noCalls := withField(`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"`)
	if resp, body := post(t, "/v1/chat/completions", noCalls); resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "small" {
		t.Errorf("tool_choice none: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
}

// The cap: once degraded answers would pass their share, the gateway
// stops degrading (503 with Retry-After here, there being no other path),
// logs it once and raises the cap metric; at_cap allow keeps degrading.
func TestDegradeCap(t *testing.T) {
	e := newChainEnv(t)
	logPath := e.loadWithGatewayLog(e.block("\t\tcap 20%"))
	gw := e.gatewayName()
	for range 8 {
		if resp, _ := post(t, "/v1/chat/completions", chatBody); resp.Header.Get("X-Hybrid-Target") != "big" {
			t.Fatal("the big model did not serve")
		}
	}
	if err := e.selfSrv.Refuse(); err != nil {
		t.Fatal(err)
	}
	// 8 answered: 2 more degraded make 2 of 10 (20%); the third would pass
	for i := range 2 {
		if resp, body := post(t, "/v1/chat/completions", chatBody); resp.Header.Get("X-Hybrid-Degraded") != "true" {
			t.Fatalf("degraded answer %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := post(t, "/v1/chat/completions", chatBody)
	wantError(t, resp, body, http.StatusServiceUnavailable, "degrade_cap_reached")
	if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "degrade_cap") {
		t.Errorf("at the cap: Retry-After %q, %s", resp.Header.Get("Retry-After"), body)
	}
	if v := metricValue(t, "caddy_hybrid_llm_degrade_cap_reached", map[string]string{"gateway": gw, "alias": "chat-main"}); v != 1 {
		t.Errorf("cap metric %v", v)
	}
	post(t, "/v1/chat/completions", chatBody)
	if n := logLines(t, logPath, `"level":"error"`, "degrade cap reached"); n != 1 {
		t.Errorf("%d cap lines, want 1", n)
	}
	var st struct {
		Gateways []struct {
			Name    string `json:"name"`
			Aliases []struct {
				Degrade *struct {
					Share      float64 `json:"share"`
					CapReached bool    `json:"cap_reached"`
				} `json:"degrade"`
			} `json:"aliases"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state"), &st); err != nil {
		t.Fatal(err)
	}
	for _, g := range st.Gateways {
		if g.Name == gw {
			if d := g.Aliases[0].Degrade; d == nil || !d.CapReached || d.Share != 0.2 {
				t.Errorf("state: %+v", d)
			}
		}
	}

	e.load(e.block("\t\tcap 20%\n\t\tat_cap allow"))
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.Header.Get("X-Hybrid-Degraded") != "true" {
		t.Errorf("at_cap allow: %d %s", resp.StatusCode, body)
	}
}

// The KV-cache trigger degrades pre-emptively: the big model still
// answers, but its cache is over 85 % and climbing, so new requests go to
// the medium tier, marked kv_pressure with the numbers; once usage falls,
// the big model has them back.
func TestDegradeOnARisingKVCache(t *testing.T) {
	e := newChainEnv(t)
	logPath := e.loadWithGatewayLog(e.block("\t\tcap off\n\t\tkv_window 1s\n\t\tdwell 300ms"))
	e.self.SetKVFloor(0.80)
	e.self.ClimbKV(0.99, 3*time.Second)
	var resp *http.Response
	waitFor(t, "a pre-emptive degrade", func() bool {
		resp, _ = post(t, "/v1/chat/completions", chatBody)
		return resp.Header.Get("X-Hybrid-Degraded") == "true"
	})
	if r := resp.Header.Get("X-Hybrid-Degrade-Reason"); r != "kv_pressure" || resp.Header.Get("X-Hybrid-Degraded-From") != "big" {
		t.Fatalf("reason %q", r)
	}
	entry := e.accessLog(resp.Header.Get("X-Request-Id"))
	if kv, _ := entry["llm_degrade_kv_cache_usage"].(float64); kv < 0.85 {
		t.Errorf("access log kv %v: %v", kv, entry)
	}
	if slope, _ := entry["llm_degrade_kv_slope_per_s"].(float64); slope <= 0 {
		t.Errorf("access log slope %v", slope)
	}
	if n := logLines(t, logPath, `"msg":"degrade on: big kv_pressure: kv_cache_usage=`); n != 1 {
		t.Errorf("%d degrade-on lines", n)
	}
	// both tiers failing: the big model, passed over, is tried last
	e.medium.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	e.small.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "big" {
		t.Errorf("with the tiers failing: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	e.medium.SetFailures(simulator.Failures{})
	e.small.SetFailures(simulator.Failures{})
	e.self.SetKVFloor(0.30)
	waitFor(t, "the big model back", func() bool {
		resp, _ := post(t, "/v1/chat/completions", chatBody)
		return resp.Header.Get("X-Hybrid-Target") == "big"
	})
	if n := logLines(t, logPath, `"msg":"degrade off: big`); n != 1 {
		t.Errorf("%d degrade-off lines", n)
	}
}

// mark_body puts the mark in the answer itself, for callers that cannot
// read headers: the official OpenAI SDK still parses the answer, the mark
// an extra field; without mark_body the answer is the upstream's.
func TestDegradeMarkBodyWithTheOpenAISDK(t *testing.T) {
	e := newChainEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, mark := range []bool{true, false} {
		opt := "off"
		if mark {
			opt = "on"
		}
		e.load(e.block("\t\tcap off\n\t\tmark_body " + opt))
		if err := e.selfSrv.Refuse(); err != nil {
			t.Fatal(err)
		}
		var last *http.Response
		sdk := sdkClient("k", &last)
		resp, err := sdk.Chat.Completions.New(ctx, chatParams())
		if err != nil {
			t.Fatalf("mark_body %s: %v", opt, err)
		}
		if resp.Choices[0].Message.Content == "" || resp.Model != "chat-main" {
			t.Errorf("mark_body %s: %+v", opt, resp)
		}
		raw := resp.JSON.ExtraFields["degraded"].Raw()
		if got := gjson.Get(raw, "from").String() == "big" && gjson.Get(raw, "reason").String() == "connection_refused"; got != mark {
			t.Errorf("mark_body %s: the body's mark %q", opt, raw)
		}
		stream := sdk.Chat.Completions.NewStreaming(ctx, chatParams())
		chunks, marked := 0, 0
		for stream.Next() {
			c := stream.Current()
			chunks++
			if c.JSON.ExtraFields["degraded"].Raw() != "" {
				marked++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("mark_body %s stream: %v", opt, err)
		}
		if want := map[bool]int{true: 1, false: 0}[mark]; chunks < 2 || marked != want {
			t.Errorf("mark_body %s stream: %d chunks, %d marked", opt, chunks, marked)
		}
		if err := e.selfSrv.Resume(); err != nil {
			t.Fatal(err)
		}
	}
}

// The latency trigger: the big model's p99 time to first token over
// 1.5 × its SLO, confirmed by a queue deeper than queue_depth, sends new
// requests to the medium tier (slo_breach, with the numbers); once the
// queue drains, the big model has them back.
func TestDegradeOnALatencyRegressionWithAQueue(t *testing.T) {
	e := newChainEnv(t)
	_, srv := startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, MaxNumSeqs: 1,
		TTFT: 150 * time.Millisecond, ITL: 10 * time.Millisecond})
	block := strings.Replace(e.block("\t\tcap off\n\t\tslo 100ms\n\t\tqueue_depth 2\n\t\tdwell 300ms"), "proxy {SELF}", "proxy "+srv.URL(), 1)
	block = strings.Replace(block, "metrics_interval 100ms", "metrics_interval 100ms\n\t\tttft_window 2s", 1)
	e.load(block)

	// six clients queue on the big model's one slot, straight at it
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		direct := strings.Replace(chatBody, "chat-main", selfModel, 1)
		sem := make(chan struct{}, 6)
		for ctx.Err() == nil {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/chat/completions", strings.NewReader(direct))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
		for range 6 {
			sem <- struct{}{}
		}
	}()
	var resp *http.Response
	waitFor(t, "a degrade on latency", func() bool {
		resp, _ = post(t, "/v1/chat/completions", chatBody)
		return resp.Header.Get("X-Hybrid-Degrade-Reason") == "slo_breach"
	})
	entry := e.accessLog(resp.Header.Get("X-Request-Id"))
	if p99, _ := entry["llm_degrade_p99_latency_ms"].(float64); p99 <= 150 {
		t.Errorf("access log p99 %v", entry["llm_degrade_p99_latency_ms"])
	}
	if q, _ := entry["llm_degrade_queue_depth"].(float64); q <= 2 {
		t.Errorf("access log queue %v", entry["llm_degrade_queue_depth"])
	}
	stop()
	<-done
	waitFor(t, "the big model back", func() bool {
		resp, _ := post(t, "/v1/chat/completions", chatBody)
		return resp.Header.Get("X-Hybrid-Target") == "big"
	})
}
