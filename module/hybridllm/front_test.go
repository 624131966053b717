// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
)

// A provisioned gateway hands the request core everything it reads of
// the gateway's config: a field the front misses would go unseen by the
// core's own tests, which build their fronts by hand.
func TestProvisionFillsTheFront(t *testing.T) {
	cfg := `{"name":"front","max_body_size":4096,"deadline":"30s","route_headers":false,` +
		`"pass_headers":["X-Trace"],` +
		`"clients":{"reserve_tokens":77,"clients":{"c":{"key":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}}},` +
		`"groups":{"a":{"kind":"openai","model_check":"off","proxy":{"upstreams":[{"dial":"127.0.0.1:1"}]}}},` +
		`"aliases":{"chat-main":{"targets":[{"group":"a","model":"gpt-a"}],"colors":[{"tag":"blue","group":"a","model":"gpt-b"}]}}}`
	storage := `{"module":"file_system","root":` + strconvQuote(t.TempDir()) + `}`
	base, err := caddy.ProvisionContext(&caddy.Config{Admin: &caddy.AdminConfig{Disabled: true}, StorageRaw: json.RawMessage(storage)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(base)
	t.Cleanup(cancel)
	g := new(Gateway)
	if err := json.Unmarshal([]byte(cfg), g); err != nil {
		t.Fatal(err)
	}
	if err := g.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Cleanup() })

	f := &g.in.Front
	switch {
	case f.Name != "front" || f.Clock != g.clock || f.Logger != g.logger || f.Money != &g.money || f.Life != ctx.Context:
		t.Errorf("the front's gateway: %q, clock %v, logger %v, books %v, life %v", f.Name, f.Clock == g.clock, f.Logger == g.logger, f.Money == &g.money, f.Life == ctx.Context)
	case f.MaxBodySize != 4096 || time.Duration(f.Deadline) != 30*time.Second || f.RouteHeadersOn || !f.AnyStreamUsage || f.ReserveTokens != 77:
		t.Errorf("the front's settings: %+v", f.Settings)
	case f.Callers == nil || f.Pass == nil || f.Colors == nil || f.MirrorLog == nil || f.BadUsage == nil:
		t.Errorf("the front lacks a part: callers %v, pass %v, colors %v, mirror log %v, bad usage %v",
			f.Callers != nil, f.Pass != nil, f.Colors != nil, f.MirrorLog != nil, f.BadUsage != nil)
	case len(f.Aliases) != 1 || f.Aliases["chat-main"] == nil || len(f.Aliases["chat-main"].Targets[0].Run.Gates) == 0:
		t.Errorf("the front's aliases: %v", f.Aliases)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
