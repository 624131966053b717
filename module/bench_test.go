// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
)

// chatRequest builds a chat request body of about size bytes.
func chatRequest(size int) []byte {
	text := strings.Repeat("lorem ipsum ", max(size/12, 1))
	b, _ := json.Marshal(map[string]any{
		"model":       "chat-main",
		"messages":    []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}},
		"max_tokens":  256,
		"temperature": 0.2,
		"stream":      true,
	})
	return b
}

// BenchmarkModelRewrite is the model swap of one attempt alone.
func BenchmarkModelRewrite(b *testing.B) {
	tg := &Target{Group: "self", Model: "qwen2.5-7b-instruct"}
	tg.modelJSON, _ = json.Marshal(tg.Model)
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}} {
		body := chatRequest(size.n)
		top, _ := scanTop(body)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if out, err := tg.setModel(body, top.model); err != nil || len(out) < len(body) {
					b.Fatal("rewrite failed")
				}
			}
		})
	}
}

// BenchmarkBodyRewrite is the whole per-request body work before the
// first attempt: validation, the top-level fields, the alias lookup and
// the model rewrite.
func BenchmarkBodyRewrite(b *testing.B) {
	g := &Gateway{aliases: map[string]*Alias{}}
	tg := &Target{Group: "self", Model: "qwen2.5-7b-instruct"}
	tg.modelJSON, _ = json.Marshal(tg.Model)
	g.aliases["chat-main"] = &Alias{name: "chat-main", Targets: []*Target{tg}}
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}} {
		body := chatRequest(size.n)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if !gjson.ValidBytes(body) {
					b.Fatal("invalid")
				}
				top, ok := scanTop(body)
				al := g.aliases[top.model.Str]
				if !ok || top.models != 1 {
					b.Fatal("bad fields")
				}
				out, err := al.Targets[0].setModel(body, top.model)
				if err != nil || len(out) < len(body) {
					b.Fatal("rewrite failed")
				}
			}
		})
	}
}

// BenchmarkFeatures is pre-routing: rules on prompt size, max_tokens, a
// header and a field, on a 100 KB request.
func BenchmarkFeatures(b *testing.B) {
	al := &Alias{name: "chat-main", Targets: []*Target{{Group: "self"}, {Group: "cloud"}}}
	al.Routes = []*Rule{
		{Target: "cloud", Header: map[string]string{"X-Workload": "batch"}},
		{Target: "cloud", Fields: []string{"tools"}},
		{Target: "cloud", MaxTokensOver: 4000},
		{Target: "cloud", PromptTokensOver: 100000},
	}
	for _, r := range al.Routes {
		if err := r.provision(al); err != nil {
			b.Fatal(err)
		}
	}
	body := chatRequest(100 << 10)
	h := http.Header{"X-Workload": {"interactive"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		top, _ := scanTop(body)
		if plan, rule := al.plan(newFeatures(body, h, &top)); rule != nil || len(plan) != 2 {
			b.Fatal("unexpected match")
		}
	}
}

// BenchmarkMeterAndLog is the per-request metrics and access-log work.
func BenchmarkMeterAndLog(b *testing.B) {
	g := &Gateway{Name: "default"}
	grp := &Group{name: "self", Kind: KindVLLM}
	t := &Target{Group: "self", Model: "qwen", group: grp}
	t.metrics = newTargetMetrics(g.Name, "chat-main", t)
	al := &Alias{name: "chat-main", Targets: []*Target{t}}
	req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	b.ReportAllocs()
	for b.Loop() {
		rt := &route{g: g, r: req, start: time.Now(), answered: t, status: 200, ttfb: time.Millisecond}
		rt.usage.found, rt.usage.prompt, rt.usage.completion = true, 100, 200
		rt.log(new(caddyhttp.ExtraLogFields), al)
	}
}

// BenchmarkUsageJSON reads the usage of a non-streamed answer.
func BenchmarkUsageJSON(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"qwen","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("word ", 200) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":200,"total_tokens":212}}`)
	var sink discard
	u := &usageScanner{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		u.buf, u.found = u.buf[:0], false
		_, _ = u.write(sink, body)
		u.readUsageJSON(u.buf)
		if !u.found {
			b.Fatal("no usage")
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
