// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	mirrorModel = "gpt-4o-next"
	mirrorKey   = "sk-mirror-secret-0123456789"
)

// mirrorEnv is the default gateway with chat-main mirrored to a cloud of
// its own (model gpt-4o-next, its own key and prices).
func mirrorEnv(t *testing.T) (*env, *simulator.Cloud, func(opts string) string) {
	t.Helper()
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	m := simulator.NewCloud(simulator.CloudConfig{Models: []string{mirrorModel}, APIKey: mirrorKey})
	srv, err := simulator.Start("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	block := func(opts string) string {
		return strings.Replace(defaultGateway, "alias chat-main {\n", "alias chat-main {\n\tmirror mirror "+mirrorModel+" {\n"+opts+"\n\t}\n", 1) +
			"group mirror {\n\tkind openai\n\tapi_key " + mirrorKey + "\n\tmodel_check off\n\tproxy " + srv.URL() +
			"\n\tcost {\n\t\tinput_per_million 1\n\t\toutput_per_million 2\n\t}\n}\n"
	}
	return e, m, block
}

func mirrorMetric(t *testing.T, name, gw string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{"gateway": gw}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	return metricValue(t, "caddy_hybrid_llm_"+name, want)
}

// A mirror gets a copy of the request with its own model name and key,
// none of the client's credentials or routing headers; the copy, streamed
// or not, is metered as shadow traffic (tokens and cost with
// billing="shadow", a log record with the parent's request id, the
// ledger's validation line) and kept out of the business metrics.
func TestMirrorCopiesAndMetersShadow(t *testing.T) {
	e, m, block := mirrorEnv(t)
	logPath := e.loadWithGatewayLog(block("\t\tratio 100%"))
	gw := e.gatewayName()
	shadowBefore := mirrorMetric(t, "tokens_total", gw, "group", "mirror", "billing", "shadow")
	businessBefore := mirrorMetric(t, "tokens_total", gw, "group", "mirror", "billing", "business")
	okBefore := mirrorMetric(t, "mirror_requests_total", gw, "outcome", "ok")
	// the ledger persists across runs of the test: what this run adds
	validationBefore, usdBefore := validation(t, gw)

	resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-client-own-key", "Api-Key", "sk-client-own-key")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Fatalf("%d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	id := resp.Header.Get("X-Request-Id")
	stream := strings.Replace(chatBody, `"max_tokens":4`, `"max_tokens":4,"stream":true`, 1)
	if resp, body := post(t, "/v1/chat/completions", stream); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	waitFor(t, "both copies metered", func() bool {
		return mirrorMetric(t, "mirror_requests_total", gw, "outcome", "ok")-okBefore == 2
	})

	copies := posts(m.Requests())
	if len(copies) != 2 {
		t.Fatalf("the mirror got %d copies, want 2", len(copies))
	}
	for _, c := range copies {
		if got := c.Header.Get("Authorization"); got != "Bearer "+mirrorKey {
			t.Errorf("a copy carried Authorization %q, not the mirror's key", got)
		}
		if c.Header.Get("Api-Key") != "" || strings.Contains(string(c.Body), "chat-main") {
			t.Errorf("a copy carried the client's key or the alias: %v %s", c.Header, c.Body)
		}
	}
	if models := models(copies); models[0] != mirrorModel || models[1] != mirrorModel {
		t.Errorf("the copies asked for %v", models)
	}
	if d := mirrorMetric(t, "tokens_total", gw, "group", "mirror", "billing", "shadow") - shadowBefore; d <= 0 {
		t.Errorf("shadow tokens moved by %v", d)
	}
	if d := mirrorMetric(t, "tokens_total", gw, "group", "mirror", "billing", "business") - businessBefore; d != 0 {
		t.Errorf("the mirror's tokens reached the business metrics: %v", d)
	}
	if mirrorMetric(t, "cloud_cost_usd_total", gw, "group", "mirror", "billing", "shadow") <= 0 {
		t.Errorf("no shadow cost")
	}
	if n := logLines(t, logPath, `"msg":"mirror request"`, `"billing":"shadow"`, `"parent_request_id":"`+id+`"`, `"llm_model":"`+mirrorModel+`"`); n != 1 {
		t.Errorf("%d shadow records of %s", n, id)
	}
	if n, usd := validation(t, gw); n-validationBefore != 2 || usd <= usdBefore {
		t.Errorf("the ledger's validation line moved by %d requests, %v USD; want 2 and some", n-validationBefore, usd-usdBefore)
	}
}

// A mirror to a vLLM group picks its endpoint through the group's
// selection policy, as an attempt does, and as a copy: it reaches an
// endpoint with room to spare, with the group's model name, and is
// dropped and counted where the endpoint has none (a red line of one
// sequence), so that it never takes a real request's place.
func TestMirrorToVLLMGroup(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	next := simulator.NewVLLM(simulator.VLLMConfig{ServedModelNames: []string{"qwen-next"}})
	srv, err := simulator.Start("127.0.0.1:0", next)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	config := func(maxNumSeqs string) string {
		return strings.Replace(defaultGateway, "alias chat-main {\n", "alias chat-main {\n\tmirror next qwen-next {\n\t\tratio 100%\n\t}\n", 1) +
			"group next {\n\tkind vllm\n\tmax_num_seqs " + maxNumSeqs + "\n\tproxy " + srv.Addr() + "\n}\n"
	}
	e.load(config("8"))
	gw := e.gatewayName()
	ok := func() float64 { return mirrorMetric(t, "mirror_requests_total", gw, "outcome", "ok") }
	dropped := func() float64 { return mirrorMetric(t, "mirror_dropped_total", gw) }
	send := func() {
		t.Helper()
		resp, body := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("%d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
	}

	okBefore, droppedBefore := ok(), dropped()
	send()
	waitFor(t, "the copy metered", func() bool { return ok()-okBefore == 1 })
	if d := dropped() - droppedBefore; d != 0 {
		t.Errorf("mirror_dropped_total moved by %v with room to spare", d)
	}
	if got := models(posts(next.Requests())); len(got) != 1 || got[0] != "qwen-next" {
		t.Fatalf("the vLLM mirror got %v, want one copy for qwen-next", got)
	}

	e.load(config("1"))
	droppedBefore = dropped()
	send()
	waitFor(t, "the copy dropped", func() bool { return dropped()-droppedBefore == 1 })
	if n := len(posts(next.Requests())); n != 1 {
		t.Errorf("the vLLM mirror without room to spare got %d copies in all, want the first one only", n)
	}
}

// validation reads the ledger's validation line of the last hour.
func validation(t *testing.T, gw string) (requests int64, usd float64) {
	t.Helper()
	var ledger struct {
		Gateways []struct {
			Validation *struct {
				Requests int64   `json:"requests"`
				USD      float64 `json:"usd"`
			} `json:"validation"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(adminGet(t, "/hybrid_llm/ledger?window=1h&gateway="+gw), &ledger); err != nil || len(ledger.Gateways) != 1 {
		t.Fatalf("ledger: %v", err)
	}
	if v := ledger.Gateways[0].Validation; v != nil {
		return v.Requests, v.USD
	}
	return 0, 0
}

// A mirror that hangs, fails or is full changes nothing for the client:
// the answer comes while the copy still hangs, a failing copy is only
// counted, and a copy over max_in_flight is dropped and counted.
func TestMirrorIsolation(t *testing.T) {
	e, m, block := mirrorEnv(t)
	e.load(block("\t\tratio 100%\n\t\tmax_in_flight 1\n\t\ttimeout 1m"))
	gw := e.gatewayName()
	m.SetFailures(simulator.Failures{Stall: time.Minute})
	done := func(outcome string) float64 {
		return mirrorMetric(t, "mirror_requests_total", gw, "outcome", outcome)
	}
	anyDone := func() float64 {
		return mirrorMetric(t, "mirror_requests_total", gw)
	}
	before, dropped := anyDone(), mirrorMetric(t, "mirror_dropped_total", gw)

	// the copy hangs for a minute; the client's answer does not wait
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Fatalf("with a hanging mirror: %d from %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
	}
	waitFor(t, "the copy to reach the mirror", func() bool { return len(posts(m.Requests())) == 1 })
	if d := anyDone() - before; d != 0 {
		t.Fatalf("the copy ended (%v) before the client's answer could be checked", d)
	}
	// a second copy finds the one in flight: dropped, the answer as ever
	resp, body = post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a full mirror: %d %s", resp.StatusCode, body)
	}
	if d := mirrorMetric(t, "mirror_dropped_total", gw) - dropped; d != 1 {
		t.Errorf("mirror_dropped_total moved by %v, want 1", d)
	}

	// a new config ends the hanging copy; a failing mirror is counted
	e.load(block("\t\tratio 100%"))
	waitFor(t, "the hanging copy to end with its config", func() bool { return anyDone()-before == 1 })
	m.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 500})
	failed := done("failed")
	for range 3 {
		if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Target") != "self" {
			t.Fatalf("with a failing mirror: %d %s", resp.StatusCode, body)
		}
	}
	waitFor(t, "three failed copies", func() bool { return done("failed")-failed == 3 })
}

// A mirror's group that is drained gets no copies: they are dropped and
// counted until it is undrained, as the real traffic it would get.
func TestMirrorSkipsADrainedGroup(t *testing.T) {
	e, m, block := mirrorEnv(t)
	e.load(block("\t\tratio 100%"))
	gw := e.gatewayName()
	dropped := func() float64 { return mirrorMetric(t, "mirror_dropped_total", gw) }
	if code, b := adminPost(t, "/hybrid_llm/drain", "application/json", `{"gateway":"`+gw+`","group":"mirror"}`); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, b)
	}
	droppedBefore := dropped()
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if d := dropped() - droppedBefore; d != 1 {
		t.Errorf("mirror_dropped_total moved by %v for a copy to a drained group, want 1", d)
	}
	if n := len(posts(m.Requests())); n != 0 {
		t.Errorf("the drained mirror got %d copies", n)
	}

	if code, b := adminPost(t, "/hybrid_llm/undrain", "application/json", `{"gateway":"`+gw+`","group":"mirror"}`); code != http.StatusOK {
		t.Fatalf("undrain: %d %s", code, b)
	}
	if resp, body := post(t, "/v1/chat/completions", chatBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	waitFor(t, "a copy once undrained", func() bool { return len(posts(m.Requests())) == 1 })
}
