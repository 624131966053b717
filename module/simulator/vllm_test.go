// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

func newVLLM(t *testing.T, cfg simulator.VLLMConfig) (*simulator.VLLM, string) {
	t.Helper()
	v := simulator.NewVLLM(cfg)
	return v, start(t, v).URL()
}

func TestVLLMModels(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"m1", "alias"}, MaxModelLen: 4096})
	r := get(t, url+"/v1/models")
	expect(t, r, 200, "")
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if got := gjson.Get(r.body, "object").Str; got != "list" {
		t.Errorf("object = %q", got)
	}
	data := gjson.Get(r.body, "data").Array()
	if len(data) != 2 {
		t.Fatalf("data has %d cards: %s", len(data), r.body)
	}
	for i, want := range []string{"m1", "alias"} {
		c := data[i]
		if c.Get("id").Str != want || c.Get("object").Str != "model" || c.Get("owned_by").Str != "vllm" ||
			c.Get("root").Str != "/models/m1" || c.Get("parent").Type != gjson.Null ||
			c.Get("max_model_len").Int() != 4096 || c.Get("created").Int() == 0 {
			t.Errorf("card %d = %s", i, c.Raw)
		}
		perm := c.Get("permission.0")
		if !strings.HasPrefix(perm.Get("id").Str, "modelperm-") || perm.Get("object").Str != "model_permission" {
			t.Errorf("permission %d = %s", i, perm.Raw)
		}
	}
}

func TestVLLMMiscEndpoints(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{})
	expect(t, get(t, url+"/health"), 200, "")
	v.SetHealthy(false)
	r := get(t, url+"/health")
	expect(t, r, 503, "")
	if r.body != "" {
		t.Errorf("unhealthy body = %q, want empty", r.body)
	}
	v.SetHealthy(true)
	expect(t, get(t, url+"/health"), 200, "")
	expect(t, get(t, url+"/ping"), 200, "")
	expect(t, get(t, url+"/version"), 200, `{"version":"0.12.0"}`)
	expect(t, get(t, url+"/nope"), 404, `{"detail":"Not Found"}`)
	expect(t, get(t, url+"/v1/chat/completions"), 405, `{"detail":"Method Not Allowed"}`)

	r = post(t, url+"/v1/chat/completions", chatBody, "X-Request-Id", "trace-42")
	expect(t, r, 200, "")
	if got := r.header.Get("X-Request-Id"); got != "trace-42" {
		t.Errorf("X-Request-Id = %q", got)
	}
}

func TestVLLMAuth(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{APIKey: "secret"})
	for _, path := range []string{"/v1/models", "/v1/chat/completions"} {
		expect(t, post(t, url+path, chatBody), 401, `{"error":"Unauthorized"}`)
		expect(t, post(t, url+path, chatBody, "Authorization", "Bearer wrong"), 401, `{"error":"Unauthorized"}`)
	}
	expect(t, get(t, url+"/v1/models", "Authorization", "Bearer secret"), 200, "")
	expect(t, post(t, url+"/v1/chat/completions", chatBody, "Authorization", "Bearer secret"), 200, "")
	// Outside /v1 no key is needed.
	expect(t, get(t, url+"/health"), 200, "")
	expect(t, get(t, url+"/metrics"), 200, "")
}

func TestVLLMErrors(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{MaxModelLen: 100})
	chat := url + "/v1/chat/completions"
	expect(t, post(t, chat, `{"model":"gpt-5","messages":[]}`), 404,
		"{\"error\":{\"message\":\"The model `gpt-5` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}}")
	expect(t, post(t, chat, `{"model":`), 400,
		`{"error":{"message":"JSON decode error","type":"BadRequestError","param":null,"code":400}}`)
	expect(t, post(t, chat, `{"model":"qwen2.5-7b-instruct"}`), 400,
		`{"error":{"message":"Field required: body.messages","type":"BadRequestError","param":null,"code":400}}`)
	expect(t, post(t, chat, `{"messages":[],"max_tokens":0}`), 400,
		`{"error":{"message":"max_tokens must be at least 1, got 0.","type":"BadRequestError","param":null,"code":400}}`)

	// 400 characters = 100 prompt tokens; with 10 output tokens, 110 > 100.
	long := strings.Repeat("abcd", 100)
	r := post(t, chat, `{"messages":[{"role":"user","content":"`+long+`"}],"max_tokens":10}`)
	expect(t, r, 400, `{"error":{"message":"This model's maximum context length is 100 tokens. However, you requested 10 output tokens and your prompt contains at least 100 input tokens, for a total of at least 110 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=100)","type":"BadRequestError","param":"input_tokens","code":400}}`)
	if want := simulator.ContextLengthMessage(100, 10, 100); gjson.Get(r.body, "error.message").Str != want {
		t.Errorf("ContextLengthMessage disagrees with the response")
	}
	// Without max_tokens the prompt alone must fit.
	expect(t, post(t, chat, `{"messages":[{"role":"user","content":"`+long+`"}]}`), 200, "")
	expect(t, post(t, url+"/v1/completions", `{"prompt":"`+long+`x"}`), 400, "")
}

func TestVLLMChat(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"m1", "alias"}, OutputTokens: 3})
	r := post(t, url+"/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"Hello, world!"}]}`)
	expect(t, r, 200, "")
	want := `{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"tok0 tok1 tok2","reasoning_content":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":4,"total_tokens":7,"completion_tokens":3,"prompt_tokens_details":null},"prompt_logprobs":null}`
	if got := normalize(r.body); got != want {
		t.Fatalf("body\n got: %s\nwant: %s", got, want)
	}

	// max_tokens is generated exactly and finishes with "length";
	// max_completion_tokens takes precedence.
	r = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
	if c := gjson.Get(r.body, "choices.0"); c.Get("message.content").Str != "tok0 tok1 tok2 tok3 tok4" || c.Get("finish_reason").Str != "length" {
		t.Errorf("max_tokens 5: %s", r.body)
	}
	r = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"max_completion_tokens":2}`)
	if gjson.Get(r.body, "usage.completion_tokens").Int() != 2 {
		t.Errorf("max_completion_tokens 2: %s", r.body)
	}
	// Content arrays count their text parts.
	r = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"12345678"},{"type":"image_url","image_url":{"url":"x"}}]}]}`)
	if gjson.Get(r.body, "usage.prompt_tokens").Int() != 2 {
		t.Errorf("content array: %s", r.body)
	}
}

func TestVLLMChatStream(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{OutputTokens: 3})
	const head = `{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"qwen2.5-7b-instruct","choices":[`
	for _, usage := range []bool{false, true} {
		t.Run(fmt.Sprint("include_usage=", usage), func(t *testing.T) {
			body := `{"model":"qwen2.5-7b-instruct","stream":true,"messages":[{"role":"user","content":"Hello, world!"}]}`
			tail := "]}"
			if usage {
				body = `{"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello, world!"}]}`
				tail = `],"usage":null}`
			}
			r := post(t, url+"/v1/chat/completions", body)
			expect(t, r, 200, "")
			if ct := r.header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			want := []string{
				head + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}` + tail,
				head + `{"index":0,"delta":{"content":"tok0"},"logprobs":null,"finish_reason":null}` + tail,
				head + `{"index":0,"delta":{"content":" tok1"},"logprobs":null,"finish_reason":null}` + tail,
				head + `{"index":0,"delta":{"content":" tok2"},"logprobs":null,"finish_reason":"stop","stop_reason":null}` + tail,
			}
			if usage {
				want = append(want, head+`],"usage":{"prompt_tokens":4,"total_tokens":7,"completion_tokens":3}}`)
			}
			want = append(want, "[DONE]")
			got := events(t, r.body)
			if len(got) != len(want) {
				t.Fatalf("got %d events, want %d:\n%s", len(got), len(want), r.body)
			}
			id := gjson.Get(got[0], "id").Str
			for i := range want {
				if i < len(want)-1 && gjson.Get(got[i], "id").Str != id {
					t.Errorf("event %d has id %s, want %s", i, gjson.Get(got[i], "id").Str, id)
				}
				if g := normalize(got[i]); g != want[i] {
					t.Errorf("event %d\n got: %s\nwant: %s", i, g, want[i])
				}
			}
		})
	}
}

func TestVLLMCompletions(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{OutputTokens: 2})
	r := post(t, url+"/v1/completions", `{"model":"qwen2.5-7b-instruct","prompt":"Hello, world!"}`)
	want := `{"id":"cmpl-ID","object":"text_completion","created":0,"model":"qwen2.5-7b-instruct","choices":[{"index":0,"text":"tok0 tok1","logprobs":null,"finish_reason":"stop","stop_reason":null,"prompt_logprobs":null}],"usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2,"prompt_tokens_details":null}}`
	if got := normalize(r.body); got != want {
		t.Fatalf("body\n got: %s\nwant: %s", got, want)
	}

	r = post(t, url+"/v1/completions", `{"prompt":["ab","cd"],"stream":true,"max_tokens":2}`)
	const head = `{"id":"cmpl-ID","object":"text_completion","created":0,"model":"qwen2.5-7b-instruct","choices":[`
	wantEv := []string{
		head + `{"index":0,"text":"tok0","logprobs":null,"finish_reason":null,"stop_reason":null}]}`,
		head + `{"index":0,"text":" tok1","logprobs":null,"finish_reason":"length","stop_reason":null}]}`,
		"[DONE]",
	}
	got := events(t, r.body)
	if len(got) != len(wantEv) {
		t.Fatalf("events: %s", r.body)
	}
	for i := range got {
		if g := normalize(got[i]); g != wantEv[i] {
			t.Errorf("event %d\n got: %s\nwant: %s", i, g, wantEv[i])
		}
	}
}

func TestVLLMEmbeddings(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{})
	r := post(t, url+"/v1/embeddings", `{"model":"qwen2.5-7b-instruct","input":["first text","second"]}`)
	expect(t, r, 200, "")
	b := normalize(r.body)
	if !strings.HasPrefix(b, `{"id":"embd-ID","object":"list","created":0,"model":"qwen2.5-7b-instruct","data":[`) ||
		!strings.HasSuffix(b, `"usage":{"prompt_tokens":4,"total_tokens":4,"completion_tokens":0,"prompt_tokens_details":null}}`) {
		t.Errorf("body = %s", b)
	}
	data := gjson.Get(r.body, "data").Array()
	if len(data) != 2 {
		t.Fatalf("data = %s", r.body)
	}
	for i, in := range []string{"first text", "second"} {
		d := data[i]
		if d.Get("object").Str != "embedding" || d.Get("index").Int() != int64(i) {
			t.Errorf("data[%d] = %s", i, d.Raw)
		}
		vec := d.Get("embedding").Array()
		want := simulator.Embedding(in)
		if len(vec) != simulator.EmbeddingDims {
			t.Fatalf("embedding length %d", len(vec))
		}
		var norm float64
		for j, x := range vec {
			if float32(x.Float()) != want[j] {
				t.Errorf("embedding[%d][%d] = %v, want %v", i, j, x.Float(), want[j])
			}
			norm += x.Float() * x.Float()
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("embedding %d has norm² %v", i, norm)
		}
	}

	r = post(t, url+"/v1/embeddings", `{"input":"first text","encoding_format":"base64"}`)
	raw, err := base64.StdEncoding.DecodeString(gjson.Get(r.body, "data.0.embedding").Str)
	if err != nil || len(raw) != 4*simulator.EmbeddingDims {
		t.Fatalf("base64 embedding: %v %s", err, r.body)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(raw)); got != simulator.Embedding("first text")[0] {
		t.Errorf("base64 embedding[0] = %v", got)
	}
}

// scrape parses /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// value returns the value of the series of name whose labels include want.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("metric %s missing", name)
	}
next:
	for _, m := range mf.GetMetric() {
		l := labels(m)
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		switch mf.GetType() {
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no %s series with %v", name, want)
	return 0
}

func TestVLLMMetrics(t *testing.T) {
	_, url := newVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"m1", "alias"}, OutputTokens: 3})
	expect(t, post(t, url+"/v1/chat/completions", `{"model":"alias","messages":[{"role":"user","content":"Hello, world!"}]}`), 200, "")
	expect(t, post(t, url+"/v1/completions", `{"prompt":"Hello","max_tokens":2}`), 200, "")

	mfs := scrape(t, url)
	types := map[string]dto.MetricType{
		"vllm:num_requests_running":        dto.MetricType_GAUGE,
		"vllm:num_requests_waiting":        dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc":         dto.MetricType_GAUGE,
		"vllm:prompt_tokens_total":         dto.MetricType_COUNTER,
		"vllm:generation_tokens_total":     dto.MetricType_COUNTER,
		"vllm:request_success_total":       dto.MetricType_COUNTER,
		"vllm:num_preemptions_total":       dto.MetricType_COUNTER,
		"vllm:time_to_first_token_seconds": dto.MetricType_HISTOGRAM,
		"vllm:e2e_request_latency_seconds": dto.MetricType_HISTOGRAM,
		"vllm:request_queue_time_seconds":  dto.MetricType_HISTOGRAM,
		"vllm:cache_config_info":           dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		mf, ok := mfs[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s has type %v, want %v", name, mf.GetType(), typ)
		}
		for _, m := range mf.GetMetric() {
			l := labels(m)
			if l["engine"] != "0" {
				t.Errorf("%s has engine label %q", name, l["engine"])
			}
			if name != "vllm:cache_config_info" && l["model_name"] != "m1" {
				t.Errorf("%s has model_name %q, want the first served name", name, l["model_name"])
			}
		}
	}
	one := map[string]string{"model_name": "m1", "engine": "0"}
	if got := value(t, mfs, "vllm:prompt_tokens_total", one); got != 4+2 {
		t.Errorf("prompt tokens = %v", got)
	}
	if got := value(t, mfs, "vllm:generation_tokens_total", one); got != 3+2 {
		t.Errorf("generation tokens = %v", got)
	}
	if got := value(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": "stop"}); got != 1 {
		t.Errorf("success{stop} = %v", got)
	}
	if got := value(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": "length"}); got != 1 {
		t.Errorf("success{length} = %v", got)
	}
	if got := value(t, mfs, "vllm:time_to_first_token_seconds", one); got != 2 {
		t.Errorf("TTFT count = %v", got)
	}
	ttft := mfs["vllm:time_to_first_token_seconds"].GetMetric()[0].GetHistogram()
	if b := ttft.GetBucket(); len(b) != 23 || b[0].GetUpperBound() != 0.001 || b[21].GetUpperBound() != 2560 {
		t.Errorf("TTFT buckets = %v", b)
	}
	cache := labels(mfs["vllm:cache_config_info"].GetMetric()[0])
	// 256 slots × 2048 tokens / 16
	if cache["block_size"] != "16" || cache["num_gpu_blocks"] != "32768" {
		t.Errorf("cache_config_info labels = %v", cache)
	}
}

// TestVLLMQueueGauges holds one request in its slot and one in the queue,
// and checks Load, the gauges, and that a client leaving the queue is
// removed from it.
func TestVLLMQueueGauges(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{MaxNumSeqs: 1, TTFT: time.Hour})
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()

	a := background(ctxA, url+"/v1/chat/completions", chatBody)
	waitLoad(t, v, 1, 0)
	b := background(ctxB, url+"/v1/chat/completions", chatBody)
	waitLoad(t, v, 1, 1)

	mfs := scrape(t, url)
	one := map[string]string{"model_name": "qwen2.5-7b-instruct", "engine": "0"}
	// The running request's 4-token prompt holds one block of the default
	// 32768 tokens (the context length: more than 1 × 2048) = 2048 blocks;
	// the waiting one holds none.
	if r, w, kv := value(t, mfs, "vllm:num_requests_running", one), value(t, mfs, "vllm:num_requests_waiting", one),
		value(t, mfs, "vllm:kv_cache_usage_perc", one); r != 1 || w != 1 || kv != 1.0/2048 {
		t.Errorf("running=%v waiting=%v kv=%v, want 1 1 1/2048", r, w, kv)
	}

	cancelB()
	if r := recv(t, b); r.err == nil {
		t.Errorf("cancelled request succeeded: %d", r.status)
	}
	waitLoad(t, v, 1, 0)
	cancelA()
	recv(t, a)
	waitLoad(t, v, 0, 0)

	mfs = scrape(t, url)
	if got := value(t, mfs, "vllm:num_requests_waiting", one); got != 0 {
		t.Errorf("waiting = %v after cancel", got)
	}
	if got := value(t, mfs, "vllm:kv_cache_usage_perc", one); got != 0 {
		t.Errorf("kv usage = %v after cancel", got)
	}
	// The request aborted while running counts as an abort; the one that
	// left the queue never ran.
	if got := value(t, mfs, "vllm:request_success_total", map[string]string{"finished_reason": "abort"}); got != 1 {
		t.Errorf("success{abort} = %v", got)
	}
}

func TestVLLMFIFO(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{MaxNumSeqs: 1, TTFT: 50 * time.Millisecond, OutputTokens: 1})
	done := make(chan string, 3)
	send := func(name string) {
		ch := background(context.Background(), url+"/v1/chat/completions", chatBody)
		go func() {
			r := <-ch
			if r.err != nil || r.status != 200 {
				done <- name + " failed"
				return
			}
			done <- name
		}()
	}
	send("A")
	waitLoad(t, v, 1, 0)
	send("B")
	waitLoad(t, v, 1, 1)
	send("C")
	waitLoad(t, v, 1, 2)
	var order []string
	for range 3 {
		select {
		case n := <-done:
			order = append(order, n)
		case <-time.After(10 * time.Second):
			t.Fatal("requests did not finish")
		}
	}
	if strings.Join(order, "") != "ABC" {
		t.Errorf("completion order %v, want A B C", order)
	}
	waitLoad(t, v, 0, 0)
}

func TestVLLMMaxQueued(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{MaxNumSeqs: 1, MaxQueued: 2, TTFT: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	a := background(ctx, url+"/v1/chat/completions", chatBody)
	waitLoad(t, v, 1, 0)
	b := background(ctx, url+"/v1/chat/completions", chatBody)
	waitLoad(t, v, 1, 1)
	r := post(t, url+"/v1/chat/completions", chatBody)
	expect(t, r, 503, `{"error":{"message":"The server is at capacity: 2 requests are queued or running (--max-num-queued-reqs). Please retry later.","type":"ServiceUnavailableError","param":null,"code":503}}`)
	cancel()
	recv(t, a)
	recv(t, b)
	waitLoad(t, v, 0, 0)
}

func TestVLLMEngines(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{Engines: 2, MaxNumSeqs: 1, TTFT: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	a := background(ctx, url+"/v1/chat/completions", chatBody)
	b := background(ctx, url+"/v1/chat/completions", chatBody)
	// One slot per engine: both run.
	waitLoad(t, v, 2, 0)
	mfs := scrape(t, url)
	for _, e := range []string{"0", "1"} {
		if got := value(t, mfs, "vllm:num_requests_running", map[string]string{"engine": e}); got != 1 {
			t.Errorf("engine %s running = %v", e, got)
		}
	}
	cancel()
	recv(t, a)
	recv(t, b)
	waitLoad(t, v, 0, 0)
}

func TestVLLMErrorRate(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{})
	v.SetFailures(simulator.Failures{ErrorRate: 0.5, ErrorStatus: 503})
	var got []int
	for range 6 {
		got = append(got, post(t, url+"/v1/chat/completions", chatBody).status)
	}
	if fmt.Sprint(got) != "[200 503 200 503 200 503]" {
		t.Errorf("statuses = %v", got)
	}
	v.SetFailures(simulator.Failures{ErrorRate: 1})
	expect(t, post(t, url+"/v1/embeddings", `{"input":"x"}`), 500,
		`{"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the root cause.","type":"InternalServerError","param":null,"code":500}}`)
	// Models and health are not affected.
	expect(t, get(t, url+"/v1/models"), 200, "")
	v.SetFailures(simulator.Failures{})
	expect(t, post(t, url+"/v1/chat/completions", chatBody), 200, "")
}

// Injected 401 and 404 look like vLLM's: its --api-key middleware, and
// its answer for a model it does not serve.
func TestVLLMInjectedAuthAndNotFound(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{})
	v.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 401})
	expect(t, post(t, url+"/v1/chat/completions", chatBody), 401, `{"error":"Unauthorized"}`)
	v.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 404})
	expect(t, post(t, url+"/v1/chat/completions", chatBody), 404,
		`{"error":{"message":"The model `+"`qwen2.5-7b-instruct`"+` does not exist.","type":"NotFoundError","param":null,"code":404}}`)
}

// A restart under another served name: requests for the old name get
// vLLM's 404, /v1/models lists the new one.
func TestVLLMSetServedModelNames(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{})
	v.SetServedModelNames("other")
	expect(t, post(t, url+"/v1/chat/completions", chatBody), 404,
		`{"error":{"message":"The model `+"`qwen2.5-7b-instruct`"+` does not exist.","type":"NotFoundError","param":null,"code":404}}`)
	if ids := gjson.Get(get(t, url+"/v1/models").body, "data.#.id").String(); ids != `["other"]` {
		t.Errorf("models %s", ids)
	}
	expect(t, post(t, url+"/v1/chat/completions", strings.Replace(chatBody, "qwen2.5-7b-instruct", "other", 1)), 200, "")
}

func TestVLLMCutStream(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{OutputTokens: 10})
	v.SetFailures(simulator.Failures{CutAfterChunks: 3})
	r := post(t, url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Fatalf("read error = %v, want unexpected EOF", r.err)
	}
	if strings.Contains(r.body, "[DONE]") {
		t.Error("cut stream contains [DONE]")
	}
	if n := strings.Count(r.body, "data: "); n != 3 {
		t.Errorf("got %d events before the cut, want 3:\n%s", n, r.body)
	}

	r = post(t, url+"/v1/chat/completions", chatBody)
	if !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Fatalf("non-stream read error = %v, want unexpected EOF", r.err)
	}
	if cl, _ := strconv.Atoi(r.header.Get("Content-Length")); len(r.body) == 0 || len(r.body) != cl/2 {
		t.Errorf("non-stream got %d bytes of Content-Length %d", len(r.body), cl)
	}

	// A stream shorter than the cut completes.
	v.SetFailures(simulator.Failures{CutAfterChunks: 100})
	r = post(t, url+"/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if r.err != nil || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Errorf("uncut stream: %v %q", r.err, r.body)
	}
}

func TestVLLMRecordedRequests(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{})
	get(t, url+"/health")
	post(t, url+"/v1/chat/completions", chatBody, "X-Tenant", "acme")
	get(t, url+"/v1/models")
	reqs := v.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	if reqs[0].Method != "POST" || reqs[0].Path != "/v1/chat/completions" || string(reqs[0].Body) != chatBody ||
		reqs[0].Header.Get("X-Tenant") != "acme" {
		t.Errorf("first = %+v", reqs[0])
	}
	if reqs[1].Method != "GET" || reqs[1].Path != "/v1/models" {
		t.Errorf("second = %+v", reqs[1])
	}
	v.ResetRequests()
	if n := len(v.Requests()); n != 0 {
		t.Errorf("after reset: %d", n)
	}
}

// PrefillPerToken adds its time for each prompt token to TTFT, before the
// first token and holding the slot; vllm:time_to_first_token_seconds
// includes it. (Only lower bounds on the time are checked.)
func TestVLLMPrefillPerToken(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{TTFT: 10 * time.Millisecond, PrefillPerToken: 500 * time.Microsecond})
	if got := v.Config().PrefillPerToken; got != 500*time.Microsecond {
		t.Errorf("PrefillPerToken = %v", got)
	}
	start := time.Now()
	expect(t, post(t, url+"/v1/chat/completions", promptOf(200, 1)), 200, "")
	// 10ms + 200 × 0.5ms
	if el := time.Since(start); el < 110*time.Millisecond {
		t.Errorf("answered after %v, want at least 110ms", el)
	}
	h := scrape(t, url)["vllm:time_to_first_token_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() < 0.110 {
		t.Errorf("TTFT histogram: %d samples, sum %vs, want 1 of at least 0.110s", h.GetSampleCount(), h.GetSampleSum())
	}

	// A request in prefill holds its slot: the next one waits.
	slow, url := newVLLM(t, simulator.VLLMConfig{MaxNumSeqs: 1, PrefillPerToken: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := background(ctx, url+"/v1/chat/completions", chatBody)
	waitLoad(t, slow, 1, 0)
	b := background(ctx, url+"/v1/chat/completions", chatBody)
	waitLoad(t, slow, 1, 1)
	cancel()
	recv(t, a)
	recv(t, b)
	waitLoad(t, slow, 0, 0)
}
