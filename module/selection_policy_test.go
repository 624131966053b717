// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
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
