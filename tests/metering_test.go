// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// metricValue reads one series from Caddy's /metrics: the sum of the
// family's series whose labels include all of want (a counter's value, or
// a histogram's sample count).
func metricValue(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(familyText(adminGet(t, "/metrics"), name)))
	if err != nil {
		t.Fatal(err)
	}
	f := families[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if !labelsMatch(m, want) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// familyText keeps the lines of one metric family of an exposition, so
// that the parser reads a few lines rather than every series the suite
// has made so far.
func familyText(exposition []byte, name string) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(exposition, []byte("\n")) {
		l := line
		if bytes.HasPrefix(l, []byte("# HELP ")) || bytes.HasPrefix(l, []byte("# TYPE ")) {
			l = l[len("# HELP "):]
		}
		rest, ok := bytes.CutPrefix(l, []byte(name))
		if !ok {
			continue
		}
		// the family's own series, or a histogram's
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if r, ok := bytes.CutPrefix(rest, []byte(suffix)); ok && len(r) > 0 && (r[0] == '{' || r[0] == ' ') {
				out.Write(line)
				out.WriteByte('\n')
				break
			}
		}
	}
	return out.Bytes()
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Tokens are counted from usage: in a JSON body, in the usage chunk of a
// stream that asked for it, and in a stream that did not, whose client
// then sees no trace of the usage the gateway asked for.
func TestTokenCounting(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	gw := e.gatewayName()
	tokens := func(kind string) float64 {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "alias": "chat-main", "group": "self", "kind": kind})
	}
	prompt0, completion0 := tokens("prompt"), tokens("completion")

	// non-streamed: 4 completion tokens (max_tokens)
	resp, body := post(t, "/v1/chat/completions", chatBody)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := tokens("completion") - completion0; got != 4 {
		t.Errorf("non-stream: %v completion tokens counted, want 4", got)
	}
	if tokens("prompt") <= prompt0 {
		t.Error("non-stream: no prompt tokens counted")
	}

	// streamed, usage asked for: the client gets the usage chunk
	completion0 = tokens("completion")
	asked := strings.Replace(streamBody, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
	resp, body = post(t, "/v1/chat/completions", asked)
	events := sseEvents(body)
	if resp.StatusCode != 200 || len(events) < 2 || !strings.Contains(events[len(events)-2], `"usage":{`) {
		t.Fatalf("asked for usage: %d %q", resp.StatusCode, events)
	}
	if got := tokens("completion") - completion0; got != 5 {
		t.Errorf("stream with usage: %v completion tokens, want 5", got)
	}

	// streamed, usage not asked for: counted, and invisible to the client
	completion0 = tokens("completion")
	resp, body = post(t, "/v1/chat/completions", streamBody)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), `"usage"`) {
		t.Errorf("the client sees usage it did not ask for:\n%s", body)
	}
	events = sseEvents(body)
	if events[len(events)-1] != "[DONE]" || len(events) != 5+2 { // role, 5 tokens, [DONE]
		t.Errorf("stream: %q", events)
	}
	if got := tokens("completion") - completion0; got != 5 {
		t.Errorf("stream without usage: %v completion tokens, want 5", got)
	}
	// and the upstream was asked for it
	reqs := e.selfPosts()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, `"stream_options":{"include_usage":true}`) {
		t.Errorf("upstream body %s", last)
	}
}

// A cloud answer is priced at the group's token prices: in the access log
// and in the cloud spend counter.
func TestCloudCostIsLoggedAndMetered(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(strings.Replace(defaultGateway, "\tproxy {CLOUD}\n",
		"\tproxy {CLOUD}\n\tcost {\n\t\tinput_per_million 2\n\t\toutput_per_million 8\n\t}\n", 1))
	gw := e.gatewayName()
	spend0 := metricValue(t, "caddy_hybrid_llm_cloud_cost_usd_total", map[string]string{"gateway": gw, "group": "cloud"})

	resp, body := post(t, "/v1/chat/completions", strings.Replace(chatBody, "chat-main", "cloud-first", 1), "X-Request-Id", "priced-1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	entry := e.accessLog("priced-1")
	prompt, _ := entry["llm_prompt_tokens"].(float64)
	completion, _ := entry["llm_completion_tokens"].(float64)
	if prompt <= 0 || completion <= 0 {
		t.Fatalf("tokens %v / %v", entry["llm_prompt_tokens"], entry["llm_completion_tokens"])
	}
	want := (prompt*2 + completion*8) / 1e6
	if got, _ := entry["llm_cost_usd"].(float64); math.Abs(got-want) > 1e-12 {
		t.Errorf("llm_cost_usd = %v, want %v", entry["llm_cost_usd"], want)
	}
	spent := metricValue(t, "caddy_hybrid_llm_cloud_cost_usd_total", map[string]string{"gateway": gw, "group": "cloud"}) - spend0
	if math.Abs(spent-want) > 1e-12 {
		t.Errorf("cloud spend grew by %v, want %v", spent, want)
	}
}

// Counters keep counting across config reloads.
func TestMetricsSurviveReloads(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	labels := map[string]string{"alias": "chat-main", "group": "self", "outcome": "ok"}
	e.load(defaultGateway)
	labels["gateway"] = e.gatewayName()
	var last float64
	for i := range 4 {
		if i > 0 {
			// a changed config each time (the alias list differs)
			e.load(defaultGateway + "alias extra-" + string(rune('a'+i)) + " {\n\ttarget cloud " + cloudModel + "\n}\n")
		}
		for range 2 {
			if r, _ := post(t, "/v1/chat/completions", chatBody); r.StatusCode != 200 {
				t.Fatalf("status %d", r.StatusCode)
			}
		}
		got := metricValue(t, "caddy_hybrid_llm_requests_total", labels)
		if got < last+2 {
			t.Fatalf("after reload %d: requests_total %v, was %v", i, got, last)
		}
		last = got
		if n := metricValue(t, "caddy_hybrid_llm_request_duration_seconds", map[string]string{"gateway": labels["gateway"], "alias": "chat-main", "group": "self"}); n < float64(2*(i+1)) {
			t.Errorf("after reload %d: %v durations observed", i, n)
		}
	}
}

func TestFallbackAndOverflowCounters(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.load(defaultGateway)
	gw := e.gatewayName()
	fallbacks := map[string]string{"gateway": gw, "alias": "chat-main", "from": "self", "to": "cloud", "reason": "connection_refused"}
	failed := map[string]string{"gateway": gw, "alias": "chat-main", "group": "", "outcome": "upstream_error", "code": "5xx"}
	fallbacks0, failed0 := metricValue(t, "caddy_hybrid_llm_fallbacks_total", fallbacks), metricValue(t, "caddy_hybrid_llm_requests_total", failed)
	_ = e.selfSrv.Refuse()
	if r, _ := post(t, "/v1/chat/completions", chatBody); r.StatusCode != 200 {
		t.Fatal(r.Status)
	}
	if got := metricValue(t, "caddy_hybrid_llm_fallbacks_total", fallbacks) - fallbacks0; got != 1 {
		t.Errorf("fallbacks_total grew by %v", got)
	}
	e.cloud.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})
	if r, _ := post(t, "/v1/chat/completions", chatBody); r.StatusCode != 502 {
		t.Fatal(r.Status)
	}
	if got := metricValue(t, "caddy_hybrid_llm_requests_total", failed) - failed0; got != 1 {
		t.Errorf("failed requests_total grew by %v", got)
	}
}

// An upstream that reports usage values that are no token counts
// (negative, absurd, fractional, strings) does not break anything: the
// client gets its answer, and tokens_total moves only by the valid ones;
// with none valid, by the gateway's estimate (the 39 bytes of messages
// are 10 tokens of prompt, "hi" one of completion).
func TestBadUsageNumbersAreIgnored(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	var usage atomic.Value
	srv, err := simulator.Start("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"`+selfModel+`","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":`+usage.Load().(string)+`}`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	e.load(withPlainSelf(defaultGateway, srv.URL()))
	gw := e.gatewayName()
	tokens := func(kind string) float64 {
		return metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "alias": "chat-main", "group": "self", "kind": kind})
	}
	for _, tc := range []struct {
		usage              string
		prompt, completion float64
	}{
		{`{"prompt_tokens":-5,"completion_tokens":1e12}`, 10, 1},
		{`{"prompt_tokens":3,"completion_tokens":1e12}`, 3, 0},
		{`{"prompt_tokens":2.5,"completion_tokens":-1}`, 10, 1},
		{`{"prompt_tokens":"4","completion_tokens":6}`, 0, 6},
	} {
		usage.Store(tc.usage)
		prompt0, completion0 := tokens("prompt"), tokens("completion")
		resp, body := post(t, "/v1/chat/completions", chatBody)
		if resp.StatusCode != 200 || resp.Header.Get("X-Hybrid-Target") != "self" || !strings.Contains(string(body), `"content":"hi"`) {
			t.Errorf("%s: %d %s %s", tc.usage, resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), body)
		}
		// the access log entry is written once the request is metered
		e.accessLog(resp.Header.Get("X-Request-Id"))
		if p, c := tokens("prompt")-prompt0, tokens("completion")-completion0; p != tc.prompt || c != tc.completion {
			t.Errorf("%s: counted %v prompt and %v completion tokens, want %v and %v", tc.usage, p, c, tc.prompt, tc.completion)
		}
	}
}
