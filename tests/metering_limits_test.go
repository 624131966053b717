// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// cuttingUpstream streams chat completions as vLLM does, in "\r\n"
// framing, one token per event, with the usage chunk at the end when
// asked for it; after sent tokens it stalls (generation goes on) until
// the gateway drops the request.
func cuttingUpstream(t *testing.T, sent int) *simulator.Server {
	return standIn(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		flush := w.(http.Flusher).Flush
		event := func(s string) { _, _ = io.WriteString(w, "data: "+s+"\r\n\r\n") }
		event(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
		for i := range min(sent, req.MaxTokens) {
			event(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" tok` + strconv.Itoa(i) + `"},"finish_reason":null}]}`)
		}
		flush()
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	})
}

// readEvents reads a stream's content events until n have come, then
// drops the connection, as a client that stops reading does.
func readEvents(t *testing.T, resp *http.Response, n int) {
	t.Helper()
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for got < n && sc.Scan() {
		if strings.Contains(sc.Text(), `"content":" tok`) {
			got++
		}
	}
	if got < n {
		t.Fatalf("the stream ended after %d events: %v", got, sc.Err())
	}
}

// A client that streams and drops the connection before the usage chunk
// is charged what it was passed: its prompt and one token per event it
// got, marked as an estimate; its tpm and its cloud budget count them.
func TestCutStreamsAreCharged(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	up := cuttingUpstream(t, 95)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	block := "name cut-" + run + "\ngroup cloud {\n\tkind openai\n\tproxy " + up.URL() + "\n\tcost {\n\t\tinput_per_million 1\n\t\toutput_per_million 1\n\t}\n}\n" +
		"alias chat-main {\n\ttarget cloud m\n}\n" +
		"clients {\n\tclient cutter " + hashed("sk-cut-"+run) + "\n\tclient small " + hashed("sk-small-"+run) + " {\n\t\ttpm 300\n\t}\n}\n"
	e.load(block)
	gw := "cut-" + run
	body := `{"model":"chat-main","messages":[{"role":"user","content":"Tell me a long story"}],"max_tokens":100,"stream":true}`
	stream := func(key string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Accept-Encoding", "gzip, br")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	var ids []string
	for range 10 {
		resp := stream("sk-cut-" + run)
		if resp.StatusCode != 200 {
			t.Fatalf("%d", resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
		readEvents(t, resp, 95)
	}
	// the messages are 49 bytes of JSON: 13 tokens as estimated
	const prompt, completion = 13, 95
	var usd float64
	for _, id := range ids {
		rec := e.accessLog(id)
		if rec["llm_outcome"] != "client_canceled" || rec["llm_usage_estimated"] != true ||
			rec["llm_prompt_tokens"] != float64(prompt) || rec["llm_completion_tokens"] != float64(completion) {
			t.Errorf("the record of a cut stream: outcome %v, estimated %v, tokens %v + %v", rec["llm_outcome"],
				rec["llm_usage_estimated"], rec["llm_prompt_tokens"], rec["llm_completion_tokens"])
		}
		usd += rec["llm_cost_usd"].(float64)
	}
	want := 10 * float64(prompt+completion) / 1e6
	if math.Abs(usd-want) > 1e-12 {
		t.Errorf("the records' cost: %v USD, want %v", usd, want)
	}
	for kind, n := range map[string]float64{"prompt": 10 * prompt, "completion": 10 * completion} {
		if got := metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "client": "cutter", "kind": kind}); got != n {
			t.Errorf("tokens_total{kind=%s} = %v, want %v", kind, got, n)
		}
	}
	if got := metricValue(t, "caddy_hybrid_llm_usage_estimated_total", map[string]string{"gateway": gw}); got != 10 {
		t.Errorf("usage_estimated_total = %v, want 10", got)
	}
	waitFor(t, "the spend book", func() bool {
		for _, c := range clientsOf(t, adminGet(t, "/hybrid_llm/clients?gateway="+gw)) {
			if c.Name == "cutter" {
				return math.Abs(c.CloudUSDToday-want) < 1e-12
			}
		}
		return false
	})

	// 300 tokens a minute: three cut streams of 100 tokens, and the
	// fourth is refused (before, a dozen went through uncounted)
	served := 0
	for i := range 12 {
		resp := stream("sk-small-" + run)
		if resp.StatusCode == http.StatusTooManyRequests {
			resp.Body.Close()
			break
		}
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		readEvents(t, resp, 95)
		served++
		// its record is written once its end is settled
		e.accessLog(resp.Header.Get("X-Request-Id"))
	}
	t.Logf("10 cut streams: %v USD and %d tokens each counted; a tpm 300 client got %d cut streams", usd, prompt+completion, served)
	if served != 3 {
		t.Errorf("%d cut streams of 100 tokens served to a client of 300 tokens a minute, want 3", served)
	}
}

// The usage of an answer of several MB (the embeddings of 40,000 inputs,
// compressed on the way) is counted and priced like any other.
func TestLargeAnswersAreCounted(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	const inputs = 40000
	var sb strings.Builder
	sb.WriteString(`{"object":"list","data":[`)
	for i := range inputs {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"object":"embedding","index":%d,"embedding":[0.01234,-0.05678,0.09012,-0.03456,0.07890,-0.0123,0.04567,-0.08901,0.02345,-0.06789,0.0111,-0.0222]}`, i)
	}
	sb.WriteString(`],"model":"e","usage":{"prompt_tokens":40000,"total_tokens":40000}}`)
	answer := []byte(sb.String())
	if len(answer) < 5<<20 {
		t.Fatalf("the answer is %d bytes", len(answer))
	}
	up := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write(answer)
			_ = zw.Close()
			return
		}
		_, _ = w.Write(answer)
	})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	gw := "large-" + run
	e.load("name " + gw + "\ngroup cloud {\n\tkind openai\n\tproxy " + up.URL() + "\n\tcost {\n\t\tinput_per_million 1\n\t}\n}\n" +
		"alias embed {\n\ttarget cloud e\n}\nclients {\n\tclient big " + hashed("sk-big-"+run) + "\n}\n")
	in := make([]string, inputs)
	for i := range in {
		in[i] = "x"
	}
	reqBody, _ := json.Marshal(map[string]any{"model": "embed", "input": in})
	for i := range 5 {
		resp, body := post(t, "/v1/embeddings", string(reqBody), "Authorization", "Bearer sk-big-"+run, "Accept-Encoding", "gzip, br")
		if resp.StatusCode != 200 || len(body) != len(answer) {
			t.Fatalf("request %d: %d, %d bytes", i, resp.StatusCode, len(body))
		}
		if rec := e.accessLog(resp.Header.Get("X-Request-Id")); rec["llm_prompt_tokens"] != float64(inputs) || rec["llm_usage_estimated"] != nil {
			t.Errorf("request %d's record: prompt tokens %v, estimated %v", i, rec["llm_prompt_tokens"], rec["llm_usage_estimated"])
		}
	}
	if got := metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "client": "big", "kind": "prompt"}); got != 5*inputs {
		t.Errorf("tokens_total{kind=prompt} = %v, want %v", got, 5*inputs)
	}
	want := 5 * float64(inputs) / 1e6
	waitFor(t, "the spend book", func() bool {
		for _, c := range clientsOf(t, adminGet(t, "/hybrid_llm/clients?gateway="+gw)) {
			if c.Name == "big" {
				return math.Abs(c.CloudUSDToday-want) < 1e-12
			}
		}
		return false
	})
}

// Fifty requests at once hold a client's tpm and cloud budget: each
// reserves its prompt and max_tokens as it is admitted, so what is served
// goes over a limit by at most one request, and the wait that follows is
// what was used, not the pile-up of fifty.
func TestLimitsHoldUnderConcurrency(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{ITL: 5 * time.Millisecond},
		simulator.CloudConfig{ITL: 5 * time.Millisecond})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	gw := "conc-" + run
	e.load("name " + gw + "\n" + pricedCloud(t) + "clients {\n\tclient tpm " + hashed("sk-tpm-"+run) + " {\n\t\ttpm 500\n\t}\n" +
		"\tclient thrifty " + hashed("sk-thrifty-"+run) + " {\n\t\tbudget_day_usd 1\n\t}\n}\n")
	const body = `{"model":"%s","messages":[{"role":"user","content":"Count to a hundred"}],"max_tokens":100}`
	type answer struct {
		status     int
		target     string
		retryAfter string
		tokens     int
	}
	burst := func(alias, key string) []answer {
		answers := make([]answer, 50)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(body, alias)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var doc struct {
					Usage struct {
						Total int `json:"total_tokens"`
					} `json:"usage"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&doc)
				answers[i] = answer{resp.StatusCode, resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("Retry-After"), doc.Usage.Total}
			}()
		}
		wg.Wait()
		return answers
	}

	// 500 tokens a minute, 100 + a few each
	served, tokens := 0, 0
	for _, a := range burst("chat-main", "sk-tpm-"+run) {
		switch a.status {
		case 200:
			served++
			tokens += a.tokens
		case http.StatusTooManyRequests:
		default:
			t.Errorf("status %d", a.status)
		}
	}
	if served < 4 || served > 5 || tokens > 500+110 {
		t.Errorf("50 at once against 500 tokens a minute: %d served, %d tokens", served, tokens)
	}
	resp, b := post(t, "/v1/chat/completions", fmt.Sprintf(body, "chat-main"), "Authorization", "Bearer sk-tpm-"+run)
	wantError(t, resp, b, http.StatusTooManyRequests, "rate_limit_exceeded")
	t.Logf("50 at once, tpm 500: %d served, %d tokens, then Retry-After %s", served, tokens, resp.Header.Get("Retry-After"))
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s > 60 {
		t.Errorf("after %d tokens of 500: Retry-After %q, want at most a minute", tokens, resp.Header.Get("Retry-After"))
	}

	// a budget of 1 USD at 2000 USD per million tokens: a request of
	// about 105 tokens costs 0.21, so five go to the cloud (the fifth
	// crosses the budget) and the others stay on self-hosted
	cloud := 0
	for _, a := range burst("cloud-first", "sk-thrifty-"+run) {
		if a.status != 200 {
			t.Errorf("status %d", a.status)
		}
		if a.target == "cloud" {
			cloud++
		}
	}
	for _, c := range clientsOf(t, adminGet(t, "/hybrid_llm/clients?gateway="+gw)) {
		if c.Name == "thrifty" {
			t.Logf("50 at once, budget 1 USD: %d to the cloud, %v USD spent", cloud, c.CloudUSDToday)
			if c.CloudUSDToday > 1+0.22 {
				t.Errorf("a budget of 1 USD spent %v USD", c.CloudUSDToday)
			}
		}
	}
	if cloud != 5 {
		t.Errorf("50 at once with a budget of 1 USD: %d went to the cloud, want 5", cloud)
	}
}

// A client that leaves before the answer, its request at an upstream, is
// charged what that upstream does with it: a cloud generates a JSON
// answer whole and bills it (the prompt and max_tokens, estimated), a
// stream stops with its connection (the prompt), and so does vLLM.
func TestClientLeavingBeforeTheAnswerIsCharged(t *testing.T) {
	// a vLLM that takes its time over the first token
	e := newEnv(t, simulator.VLLMConfig{TTFT: 20 * time.Second}, simulator.CloudConfig{})
	arrived := make(chan struct{}, 8)
	cloud := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	gw := "left-" + run
	e.load("name " + gw + "\ngroup cloud {\n\tkind openai\n\tmodel_check off\n\tproxy " + cloud.URL() + "\n\tcost {\n\t\tinput_per_million 1\n\t\toutput_per_million 1\n\t}\n}\n" +
		"group self {\n\tkind vllm\n\tproxy " + e.selfSrv.URL() + "\n}\n" +
		"alias c {\n\ttarget cloud m\n}\nalias s {\n\ttarget self " + selfModel + "\n}\n" +
		"clients {\n\tclient leaver " + hashed("sk-leaver-"+run) + "\n}\n")
	waitProbed(t)
	const messages = `[{"role":"user","content":"Write an essay"}]`
	prompt := float64((len(messages) + 3) / 4)
	leave := func(id, alias string, stream bool) {
		body := `{"model":"` + alias + `","messages":` + messages + `,"max_tokens":500,"stream":` + strconv.FormatBool(stream) + `}`
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-leaver-"+run)
		req.Header.Set("X-Request-Id", id)
		done := make(chan struct{})
		before := len(e.selfPosts())
		go func() {
			defer close(done)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("%s: answered %d", id, resp.StatusCode)
			}
		}()
		// the upstream has it
		if alias == "c" {
			<-arrived
		} else {
			waitFor(t, "the request at vLLM", func() bool { return len(e.selfPosts()) > before })
		}
		cancel()
		<-done
	}
	for _, tc := range []struct {
		id, alias  string
		stream     bool
		completion float64
	}{
		{"left-cloud-json-" + run, "c", false, 500},
		{"left-cloud-stream-" + run, "c", true, 0},
		{"left-self-json-" + run, "s", false, 0},
	} {
		leave(tc.id, tc.alias, tc.stream)
		rec := e.accessLog(tc.id)
		if rec["llm_outcome"] != "client_canceled" || rec["llm_usage_estimated"] != true ||
			rec["llm_prompt_tokens"] != prompt || rec["llm_completion_tokens"] != tc.completion {
			t.Errorf("%s: outcome %v, estimated %v, tokens %v + %v, want %v + %v", tc.id, rec["llm_outcome"],
				rec["llm_usage_estimated"], rec["llm_prompt_tokens"], rec["llm_completion_tokens"], prompt, tc.completion)
		}
	}
	want := (2*prompt + 500) / 1e6
	waitFor(t, "the spend book", func() bool {
		for _, c := range clientsOf(t, adminGet(t, "/hybrid_llm/clients?gateway="+gw)) {
			if c.Name == "leaver" {
				return math.Abs(c.CloudUSDToday-want) < 1e-12
			}
		}
		return false
	})
	if got := metricValue(t, "caddy_hybrid_llm_tokens_total", map[string]string{"gateway": gw, "group": "self", "kind": "prompt"}); got != prompt {
		t.Errorf("self's prompt tokens: %v, want %v", got, prompt)
	}
}

// An image in a prompt counts against its client's tpm as a model bills
// it, about a thousand tokens, not as the few dozen bytes of its URL:
// after an answer without usage (charged the gateway's estimate), a
// request with two images leaves a client of 1,500 tokens a minute
// refused, where the same request without them leaves it served.
func TestAnInlineImageCountsAgainstATokenLimit(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	// a JSON answer without usage: the gateway charges its estimate
	up := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	})
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	text, images := "sk-text-"+run, "sk-images-"+run
	e.load("name images-" + run + "\ngroup cloud {\n\tkind openai\n\tproxy " + up.URL() + "\n}\n" +
		"alias chat-main {\n\ttarget cloud m\n}\n" +
		"clients {\n\tclient text " + hashed(text) + " {\n\t\ttpm 1500\n\t}\n\tclient images " + hashed(images) + " {\n\t\ttpm 1500\n\t}\n}\n")
	const plain = `{"model":"chat-main","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4}`
	image := func(url string) string {
		return `{"type":"image_url","image_url":{"url":"` + url + `"}}`
	}
	const textPart = `{"type":"text","text":"What differs between these?"}`
	withImages := `{"model":"chat-main","messages":[{"role":"user","content":[` + textPart + `,` +
		image("https://img.example/a.png") + `,` + image("https://img.example/b.png") + `]}],"max_tokens":4}`
	withoutImages := `{"model":"chat-main","messages":[{"role":"user","content":[` + textPart + `]}],"max_tokens":4}`

	for _, tc := range []struct {
		key, body string
		refused   bool
	}{{text, withoutImages, false}, {images, withImages, true}} {
		resp, body := post(t, "/v1/chat/completions", tc.body, "Authorization", "Bearer "+tc.key)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.key, resp.StatusCode, body)
		}
		rec := e.accessLog(resp.Header.Get("X-Request-Id"))
		// without images, the messages' 82 bytes of JSON: 21 tokens;
		// with them, the text's 27 bytes (7 tokens) and 1,000 an image,
		// not their 220 bytes of JSON (55 tokens)
		want := map[bool]float64{false: 21, true: 2007}[tc.refused]
		if rec["llm_usage_estimated"] != true || rec["llm_prompt_tokens"] != want {
			t.Errorf("%s: estimated %v, prompt tokens %v, want %v", tc.key, rec["llm_usage_estimated"], rec["llm_prompt_tokens"], want)
		}
		resp, body = post(t, "/v1/chat/completions", plain, "Authorization", "Bearer "+tc.key)
		if !tc.refused {
			if resp.StatusCode != 200 {
				t.Errorf("after a prompt without images: %d %s", resp.StatusCode, body)
			}
			continue
		}
		apiErr := wantError(t, resp, body, http.StatusTooManyRequests, "rate_limit_exceeded")
		if apiErr.Error.Type != "tokens" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("after a prompt with images: type %q, Retry-After %q", apiErr.Error.Type, resp.Header.Get("Retry-After"))
		}
	}
}
