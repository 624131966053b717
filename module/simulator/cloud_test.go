// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const (
	cloudKey  = "sk-test-0123456789abcdef"
	cloudChat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello, world!"}]}`
)

var auth = []string{"Authorization", "Bearer " + cloudKey}

func newCloud(t *testing.T, cfg simulator.CloudConfig) (*simulator.Cloud, string) {
	t.Helper()
	c := simulator.NewCloud(cfg)
	return c, start(t, c).URL()
}

func TestCloudAuth(t *testing.T) {
	_, url := newCloud(t, simulator.CloudConfig{APIKey: cloudKey})
	chat := url + "/v1/chat/completions"
	r := post(t, chat, cloudChat, "Authorization", "Bearer sk-wrong-key-98765xyz")
	expect(t, r, 401, `{"error":{"message":"Incorrect API key provided: sk-***5xyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
	if strings.Contains(r.body, "sk-wrong-key-98765xyz") {
		t.Error("401 echoes the whole key")
	}
	r = post(t, chat, cloudChat)
	expect(t, r, 401, "")
	if e := gjson.Get(r.body, "error"); !strings.HasPrefix(e.Get("message").Str, "You didn't provide an API key.") ||
		e.Get("type").Str != "invalid_request_error" || e.Get("code").Type != gjson.Null {
		t.Errorf("missing key body = %s", r.body)
	}
	// Auth comes before anything else, even for unknown models.
	expect(t, post(t, chat, `{"model":"nope"}`, "Authorization", "Bearer x"), 401, "")
	expect(t, get(t, url+"/v1/models"), 401, "")
	expect(t, post(t, chat, cloudChat, auth...), 200, "")

	for key, want := range map[string]string{"sk-short": "sk-***", "ab": "a***", "": "***", "sk-proj-abcdefgh1234": "sk-***1234"} {
		if got := simulator.MaskKey(key); got != want {
			t.Errorf("MaskKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// GET /healthz needs no key and follows SetHealthy; requests are
// answered either way.
func TestCloudHealthz(t *testing.T) {
	c, url := newCloud(t, simulator.CloudConfig{APIKey: cloudKey})
	expect(t, get(t, url+"/healthz"), 200, `{"status":"ok"}`)
	c.SetHealthy(false)
	expect(t, get(t, url+"/healthz"), 503, `{"status":"unavailable"}`)
	expect(t, post(t, url+"/v1/chat/completions", cloudChat, auth...), 200, "")
}

func TestCloudModels(t *testing.T) {
	_, url := newCloud(t, simulator.CloudConfig{Models: []string{"gpt-4o-mini", "gpt-4o"}})
	r := get(t, url+"/v1/models")
	expect(t, r, 200, "")
	b := createdRE.ReplaceAllString(r.body, `"created":0`)
	want := `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":0,"owned_by":"system"},{"id":"gpt-4o","object":"model","created":0,"owned_by":"system"}]}`
	if b != want {
		t.Errorf("models\n got: %s\nwant: %s", b, want)
	}
	expect(t, get(t, url+"/v1/models/gpt-4o"), 200, "")
	expect(t, get(t, url+"/v1/models/o9"), 404, "")
	expect(t, get(t, url+"/v1/nope"), 404,
		`{"error":{"message":"Invalid URL (GET /v1/nope)","type":"invalid_request_error","param":null,"code":null}}`)
	if id := get(t, url+"/v1/models").header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("X-Request-Id = %q", id)
	}
}

func TestCloudErrors(t *testing.T) {
	_, url := newCloud(t, simulator.CloudConfig{MaxModelLen: 100})
	chat := url + "/v1/chat/completions"
	expect(t, post(t, chat, `{"model":"gpt-5","messages":[]}`), 404,
		"{\"error\":{\"message\":\"The model `gpt-5` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}")
	r := post(t, chat, `{"model":"gpt-4o-mini",`)
	expect(t, r, 400, "")
	if e := gjson.Get(r.body, "error"); !strings.HasPrefix(e.Get("message").Str, "We could not parse the JSON body of your request.") ||
		e.Get("type").Str != "invalid_request_error" {
		t.Errorf("bad JSON body = %s", r.body)
	}
	expect(t, post(t, chat, `{"messages":[]}`), 400,
		`{"error":{"message":"you must provide a model parameter","type":"invalid_request_error","param":null,"code":null}}`)
	expect(t, post(t, chat, `{"model":"gpt-4o-mini"}`), 400,
		`{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}`)

	long := strings.Repeat("abcd", 101) // 101 tokens
	expect(t, post(t, chat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+long+`"}]}`), 400,
		`{"error":{"message":"This model's maximum context length is 100 tokens. However, your messages resulted in 101 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
	expect(t, post(t, chat, `{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"`+long[:240]+`"}]}`), 400,
		`{"error":{"message":"This model's maximum context length is 100 tokens. However, you requested 110 tokens (60 in the messages, 50 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
}

func TestCloudRateLimit(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	_, url := newCloud(t, simulator.CloudConfig{RateLimit: 2, Clock: clock.Now})
	chat := url + "/v1/chat/completions"
	expect(t, post(t, chat, cloudChat), 200, "")
	clock.Advance(900 * time.Millisecond) // same one-second window
	expect(t, post(t, chat, cloudChat), 200, "")
	r := post(t, chat, cloudChat)
	expect(t, r, 429, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-simulated on requests per second (RPS): Limit 2, Used 2, Requested 1. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	if ra := r.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q", ra)
	}
	clock.Advance(100 * time.Millisecond) // next window
	expect(t, post(t, chat, cloudChat), 200, "")
}

func TestCloudFormats(t *testing.T) {
	_, url := newCloud(t, simulator.CloudConfig{Models: []string{"gpt-4o-mini", "gpt-4o"}, OutputTokens: 2})
	r := post(t, url+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello, world!"}]}`)
	expect(t, r, 200, "")
	usage := `"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	want := `{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"gpt-4o","service_tier":"default","system_fingerprint":"fp_0d4f3c1b9e","choices":[{"index":0,"message":{"role":"assistant","content":"tok0 tok1","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],` + usage + `}`
	if got := normalize(r.body); got != want {
		t.Errorf("chat\n got: %s\nwant: %s", got, want)
	}

	r = post(t, url+"/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello, world!"}]}`)
	head := `{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_0d4f3c1b9e","choices":[`
	wantEv := []string{
		head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
		head + `{"index":0,"delta":{"content":"tok0"},"logprobs":null,"finish_reason":null}],"usage":null}`,
		head + `{"index":0,"delta":{"content":" tok1"},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
		head + `],` + usage + `}`,
		"[DONE]",
	}
	got := events(t, r.body)
	if len(got) != len(wantEv) {
		t.Fatalf("stream: %s", r.body)
	}
	for i := range got {
		if g := normalize(got[i]); g != wantEv[i] {
			t.Errorf("event %d\n got: %s\nwant: %s", i, g, wantEv[i])
		}
	}

	r = post(t, url+"/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if strings.Contains(r.body, `"usage"`) {
		t.Errorf("usage sent without include_usage: %s", r.body)
	}

	r = post(t, url+"/v1/embeddings", `{"model":"gpt-4o-mini","input":"Hello, world!"}`)
	if !strings.HasPrefix(r.body, `{"object":"list","data":[{"index":0,"object":"embedding","embedding":[`) ||
		!strings.HasSuffix(r.body, `],"model":"gpt-4o-mini","usage":{"prompt_tokens":4,"total_tokens":4}}`) {
		t.Errorf("embeddings = %s", r.body)
	}

	r = post(t, url+"/v1/completions", `{"model":"gpt-4o-mini","prompt":"Hello, world!","max_tokens":1}`)
	if c := gjson.Get(r.body, "choices.0"); gjson.Get(r.body, "object").Str != "text_completion" ||
		c.Get("text").Str != "tok0" || c.Get("finish_reason").Str != "length" {
		t.Errorf("completions = %s", r.body)
	}
}

func TestCloudFailures(t *testing.T) {
	c, url := newCloud(t, simulator.CloudConfig{OutputTokens: 5})
	chat := url + "/v1/chat/completions"
	c.SetFailures(simulator.Failures{ErrorRate: 1})
	expect(t, post(t, chat, cloudChat), 500,
		`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)
	c.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 429})
	r := post(t, chat, cloudChat)
	if r.status != 429 || r.header.Get("Retry-After") != "1" || gjson.Get(r.body, "error.code").Str != "rate_limit_exceeded" {
		t.Errorf("injected 429: %d %v %s", r.status, r.header, r.body)
	}
	c.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 401})
	if r := post(t, chat, cloudChat); r.status != 401 || gjson.Get(r.body, "error.code").Str != "invalid_api_key" {
		t.Errorf("injected 401: %d %s", r.status, r.body)
	}
	c.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 404})
	if r := post(t, chat, cloudChat); r.status != 404 || gjson.Get(r.body, "error.code").Str != "model_not_found" {
		t.Errorf("injected 404: %d %s", r.status, r.body)
	}
	c.SetFailures(simulator.Failures{ErrorRate: 1.0 / 3})
	var got []int
	for range 6 {
		got = append(got, post(t, chat, cloudChat).status)
	}
	if want := []int{200, 200, 500, 200, 200, 500}; !equalInts(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}

	c.SetFailures(simulator.Failures{CutAfterChunks: 2})
	r = post(t, chat, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if !errors.Is(r.err, io.ErrUnexpectedEOF) || strings.Contains(r.body, "[DONE]") || strings.Count(r.body, "data: ") != 2 {
		t.Errorf("cut stream: err %v body %q", r.err, r.body)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A compressing cloud gzips what the client allows, streams included, and
// frames its events with the configured line ending.
func TestCloudCompressAndLineEnding(t *testing.T) {
	c := simulator.NewCloud(simulator.CloudConfig{Compress: true, SSELineEnding: "\r\n", OutputTokens: 3})
	srv, err := simulator.Start("127.0.0.1:0", c)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	post := func(body, acceptEncoding string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if r, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	stream := strings.Replace(cloudChat, `{"model"`, `{"stream":true,"model"`, 1)
	for _, tc := range []struct {
		body, accept, encoding string
	}{
		{cloudChat, "gzip, br", "gzip"},
		{cloudChat, "", ""},
		{cloudChat, "gzip;q=0, br", ""},
		{stream, "gzip", "gzip"},
		{stream, "identity", ""},
	} {
		resp, body := post(tc.body, tc.accept)
		if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", tc.accept, got, tc.encoding)
		}
		if tc.body == stream {
			if !strings.HasSuffix(body, "data: [DONE]\r\n\r\n") || strings.Contains(strings.ReplaceAll(body, "\r\n", ""), "\n") {
				t.Errorf("stream not framed with CRLF: %q", body)
			}
		} else if !gjson.Valid(body) {
			t.Errorf("body %q", body)
		}
	}
}
