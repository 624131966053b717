// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// In a plain reverse_proxy the policy meets upstreams it cannot probe (a
// unix socket, a placeholder address) and balances them on Caddy's
// request count; unloading the config afterwards (a reload, a stop) must
// not crash Caddy.
func TestStandalonePolicyCleanupAfterUnprobeableUpstream(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	s := new(LeastLoadSelection)
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	pool := reverseproxy.UpstreamPool{{Host: new(reverseproxy.Host), Dial: "unix//run/vllm.sock"}}
	if u := s.Select(pool, httptest.NewRequest("POST", "/v1/chat/completions", nil), nil); u != pool[0] {
		t.Fatalf("selected %v", u)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Cleanup panicked: %v", r)
		}
	}()
	if err := s.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

// Dynamic upstreams come and go: the policy stops probing an address no
// pool has held for a while, and keeps probing those still there.
func TestStandalonePolicyReleasesDepartedUpstreams(t *testing.T) {
	clk := driveProcessClock(t)
	_, a := simulator.StartVLLM(t, simulator.VLLMConfig{})
	_, b := simulator.StartVLLM(t, simulator.VLLMConfig{})
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	s := &LeastLoadSelection{Probe: &ProbeConfig{UnknownMetrics: "ok"}}
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Cleanup()
	up := func(srv *simulator.Server) *reverseproxy.Upstream {
		return &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: srv.Addr()}
	}
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	refs := func(srv *simulator.Server) int {
		return probe.Holds(srv.URL())
	}

	s.Select(reverseproxy.UpstreamPool{up(a), up(b)}, req, nil)
	if refs(a) != 1 || refs(b) != 1 {
		t.Fatalf("probers after the first pick: a %d, b %d", refs(a), refs(b))
	}
	// a leaves the pool (the lookup no longer returns it)
	for range 12 {
		clk.Advance(time.Minute)
		s.Select(reverseproxy.UpstreamPool{up(b)}, req, nil)
	}
	if refs(a) != 0 {
		t.Errorf("the prober of a departed upstream is still held: %d references", refs(a))
	}
	if refs(b) != 1 {
		t.Errorf("the prober of a present upstream was released: %d references", refs(b))
	}
	// a comes back: probed again
	s.Select(reverseproxy.UpstreamPool{up(a), up(b)}, req, nil)
	if refs(a) != 1 {
		t.Errorf("a returning upstream is not probed: %d references", refs(a))
	}
}
