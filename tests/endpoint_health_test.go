// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// endpointScore reads an endpoint's health score from the state.
func endpointScore(t *testing.T, gw, group, addr string) (level string, percent int) {
	t.Helper()
	for _, g := range getState(t).Gateways {
		if g.Name != gw {
			continue
		}
		for _, grp := range g.Groups {
			for _, ep := range grp.Endpoints {
				if grp.Name == group && ep.Address == addr && ep.HealthScore != nil {
					return ep.HealthScore.Level, *ep.ServePercent
				}
			}
		}
	}
	t.Fatalf("no health score for %s/%s", group, addr)
	return "", 0
}

// chatFrom4 sends n chat requests from 4 clients at once; each must be
// answered by self.
func chatFrom4(t *testing.T, n int) {
	t.Helper()
	if counts := sendBody(t, chatBody, n); counts["self"] != n {
		t.Errorf("of %d requests, self answered %v", n, counts)
	}
}

// With a health block on a vllm group, each endpoint is scored on its
// own: a replica that turns slow (which no breaker sees: it answers) is
// taken out of the group's selection, the other replica serves, and the
// slow one ramps back once it is fast again.
func TestSlowReplicaIsTakenOutOfItsGroup(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	_, srv := secondSelf(t)
	block := strings.Replace(vllmBlock("\thealth {\n\t\tp99_latency 150ms\n\t\tmin_requests 8\n\t\thold 300ms\n\t\tramp_interval 100ms\n\t}\n"),
		"proxy {SELF}\n", "proxy {SELF} "+srv.URL()+"\n", 1)
	logPath := e.loadWithGatewayLog(block)
	gw, slow := e.gatewayName(), e.selfSrv.Addr()
	if level, pct := endpointScore(t, gw, "self", slow); level != "ok" || pct != 100 {
		t.Fatalf("at start: %s at %d%%", level, pct)
	}

	e.self.SetFailures(simulator.Failures{Stall: 300 * time.Millisecond})
	waitFor(t, "the slow replica taken out", func() bool {
		chatFrom4(t, 8)
		level, _ := endpointScore(t, gw, "self", slow)
		return level == "degraded"
	})
	if n := logLines(t, logPath, `"msg":"route[self/`+slow+`] p99=`, "> 150ms"); n != 1 {
		t.Errorf("%d degrade lines for the slow replica", n)
	}
	if n := logLines(t, logPath, `"msg":"scheduler degrade: weight self/`+slow+` 100 -> 0"`); n != 1 {
		t.Errorf("%d weight lines for the slow replica", n)
	}
	before := len(e.selfPosts())
	chatFrom4(t, 12)
	if _, pct := endpointScore(t, gw, "self", slow); pct != 0 {
		t.Errorf("degraded, yet serving at %d%%", pct)
	}
	if d := len(e.selfPosts()) - before; d != 0 {
		// its hold may end within these requests: only before that
		if level, _ := endpointScore(t, gw, "self", slow); level == "degraded" {
			t.Errorf("the degraded replica got %d requests", d)
		}
	}

	e.self.SetFailures(simulator.Failures{})
	waitFor(t, "the replica back at full share", func() bool {
		chatFrom4(t, 8)
		level, pct := endpointScore(t, gw, "self", slow)
		return level == "ok" && pct == 100
	})
	if n := logLines(t, logPath, `"msg":"route healthy: self/`+slow+` back at weight 100"`); n != 1 {
		t.Errorf("%d recovery lines", n)
	}
}
