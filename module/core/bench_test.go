// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
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

// BenchmarkModelRewrite is the model swap of one attempt alone, read out
// as the upstream reads it.
func BenchmarkModelRewrite(b *testing.B) {
	tg := &routing.Target{Group: "self", Model: "qwen2.5-7b-instruct"}
	tg.Run.ModelJSON, _ = json.Marshal(tg.Model)
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}} {
		body := chatRequest(size.n)
		top, _ := protocol.Scan(body)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			var ub upstreamBody
			for b.Loop() {
				sp, _ := modelSplice(tg, &top, priority.Standard)
				if n, _ := ub.set(body, sp), 0; n < int64(len(body)) {
					b.Fatal("rewrite failed")
				}
			}
		})
	}
}

// BenchmarkBodyRewrite is the whole per-request body work before the
// first attempt: validation and the top-level fields in one pass, the
// alias lookup and the model swap.
func BenchmarkBodyRewrite(b *testing.B) {
	g := newFront(Front{Aliases: map[string]*routing.Alias{}})
	tg := &routing.Target{Group: "self", Model: "qwen2.5-7b-instruct"}
	tg.Run.ModelJSON, _ = json.Marshal(tg.Model)
	g.Aliases["chat-main"] = &routing.Alias{Name: "chat-main", Targets: []*routing.Target{tg}}
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"100KB", 100 << 10}, {"1MB", 1 << 20}} {
		body := chatRequest(size.n)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var ub upstreamBody
			for b.Loop() {
				top, ok := protocol.Scan(body)
				al, found := aliasNamed(g.Aliases, &top)
				if !ok || top.Models != 1 || !found {
					b.Fatal("bad fields")
				}
				sp, _ := modelSplice(al.Targets[0], &top, priority.Standard)
				if n := ub.set(body, sp); n < int64(len(body)) {
					b.Fatal("rewrite failed")
				}
			}
		})
	}
}

// BenchmarkGjsonValid is the validator protocol.Scan replaced, for comparison.
func BenchmarkGjsonValid(b *testing.B) {
	body := chatRequest(100 << 10)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !gjson.ValidBytes(body) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkFeatures is pre-routing: the body's one pass, then rules on
// prompt size, max_tokens, a header and a field, on a 100 KB request.
func BenchmarkFeatures(b *testing.B) {
	al := &routing.Alias{Name: "chat-main", Targets: []*routing.Target{{Group: "self"}, {Group: "cloud"}}}
	al.Routes = []*routing.Rule{
		{Group: "cloud", Header: map[string]string{"X-Workload": "batch"}},
		{Group: "cloud", Fields: []string{"tools"}},
		{Group: "cloud", MaxTokensOver: 4000},
		{Group: "cloud", PromptTokensOver: 100000},
	}
	g := new(routing.AliasSetup)
	for _, r := range al.Routes {
		if err := r.Provision(g, al); err != nil {
			b.Fatal(err)
		}
	}
	body := chatRequest(100 << 10)
	h := http.Header{"X-Workload": {"interactive"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var top protocol.Request // the route's, in the gateway
	for b.Loop() {
		top, _ = protocol.Scan(body, g.Watch...)
		f := routing.NewFeatures(body, h, &top)
		if plan, rule := al.Plan(&f); rule != nil || len(plan) != 2 {
			b.Fatal("unexpected match")
		}
	}
}

// BenchmarkScanTop is the body's one pass alone, on a 4 KB chat request
// with stream_options.
func BenchmarkScanTop(b *testing.B) {
	body := chatRequest(4 << 10)
	body = append(body[:len(body)-1], `,"stream_options":{"include_usage":false},"n":1}`...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if top, ok := protocol.Scan(body); !ok || top.Model == nil {
			b.Fatal("not read")
		}
	}
}

// BenchmarkMeterAndLog is the per-request metrics and access-log work:
// with access logs off, and with the routing record written as JSON.
func BenchmarkMeterAndLog(b *testing.B) {
	g := newFront(Front{Name: "default"})
	grp := &upstream.Group{Run: upstream.GroupRun{Name: "self"}, Kind: upstream.KindVLLM}
	t := &routing.Target{Group: "self", Model: "qwen", Upstream: grp}
	t.Seen.Metrics = routing.NewTargetMetrics(g.Name, "chat-main", t, "")
	al := &routing.Alias{Name: "chat-main", Targets: []*routing.Target{t}}
	req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, logs := range []bool{false, true} {
		name := "logs_off"
		if logs {
			name = "logs_on"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			rt := new(Route) // the route comes with the request, not with this work
			for b.Loop() {
				*rt = Route{f: g, r: req, q: routing.Asked{API: protocol.ForPath(req.URL.Path)}}
				rt.x = exchange{alias: al, r: req, q: &rt.q, start: time.Now(), ans: answer{target: t, status: 200, ttfb: time.Millisecond}}
				rt.x.usage.Found, rt.x.usage.Prompt, rt.x.usage.Completion = true, 100, 200
				extra := new(caddyhttp.ExtraLogFields)
				extra.Add(zap.Inline(&rt.x))
				rt.finish()
				if logs {
					buf, err := enc.EncodeEntry(zapcore.Entry{Message: "handled request"}, []zap.Field{zap.Inline(&rt.x)})
					if err != nil || buf.Len() == 0 {
						b.Fatal("no entry")
					}
					buf.Free()
				}
			}
		})
	}
}
