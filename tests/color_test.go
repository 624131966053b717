// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

const (
	testerKey = "sk-tester-0123456789abcdef"
	appKey    = "sk-app-0123456789abcdef"
)

// colorBlock is the default gateway with two clients (tester, named by
// the color; app, not) and chat-main's colors: canary, to the canary
// group, trusted for tester; blue, trusted for loopback; red, trusted
// for a range no test request comes from.
func colorBlock(canary *simulator.Server, canaryOpts string) string {
	return strings.Replace(defaultGateway, "alias chat-main {\n", "alias chat-main {\n"+
		"\tcolor canary canary "+cloudModel+" {\n\t\ttrusted_clients tester\n"+canaryOpts+"\n\t}\n"+
		"\tcolor blue cloud "+cloudModel+" {\n\t\ttrusted_ranges 127.0.0.0/8 ::1\n\t}\n"+
		"\tcolor red cloud "+cloudModel+" {\n\t\ttrusted_ranges 10.0.0.0/8\n\t}\n", 1) +
		"group canary {\n\tkind openai\n\tapi_key " + cloudKey + "\n\tmodel_check off\n\tproxy " + canary.URL() + "\n}\n" +
		"clients {\n\tclient tester sha256:" + sha256Hex(testerKey) + "\n\tclient app sha256:" + sha256Hex(appKey) + "\n}\n"
}

func colored(t *testing.T, key, tag string) *http.Response {
	t.Helper()
	resp, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer "+key, "X-Route-Tag", tag)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tag %q: %d %s", tag, resp.StatusCode, body)
	}
	return resp
}

func ignoredColors(t *testing.T, gw, reason string) float64 {
	t.Helper()
	return metricValue(t, "caddy_hybrid_llm_colors_ignored_total", map[string]string{"gateway": gw, "alias": "chat-main", "reason": reason})
}

// A tag from a trusted source (a client the color names, an address in
// its ranges) sends the request to the color's target, with the tag
// passed upstream, logged and counted; a tag from anyone else, or one the
// alias has no color for, is removed and the answer says it was ignored.
func TestColorsFromTrustedSources(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	canary, _, canarySrv, _ := twoClouds(t)
	e.load(colorBlock(canarySrv, ""))
	gw := e.gatewayName()

	coloredBefore := metricValue(t, "caddy_hybrid_llm_requests_total", map[string]string{"gateway": gw, "color": "canary"})
	resp := colored(t, testerKey, "canary")
	if g, c := resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Color"); g != "canary" || c != "canary" {
		t.Fatalf("a trusted client's canary request went to %q (X-Hybrid-Color %q)", g, c)
	}
	got := posts(canary.Requests())
	if len(got) != 1 || got[0].Header.Get("X-Route-Tag") != "canary" {
		t.Fatalf("the canary got %d requests, the tag %q", len(got), got[0].Header.Get("X-Route-Tag"))
	}
	if got[0].Header.Get("Authorization") != "Bearer "+cloudKey {
		t.Errorf("the canary got the credentials %q, not its group's", got[0].Header.Get("Authorization"))
	}
	if entry := e.accessLog(resp.Header.Get("X-Request-Id")); entry["llm_color"] != "canary" {
		t.Errorf("access log llm_color = %v", entry["llm_color"])
	}
	if d := metricValue(t, "caddy_hybrid_llm_requests_total", map[string]string{"gateway": gw, "color": "canary"}) - coloredBefore; d != 1 {
		t.Errorf("requests_total{color=canary} moved by %v, want 1", d)
	}

	// the same tag from a client the color does not trust
	untrusted := ignoredColors(t, gw, "untrusted")
	selfBefore := len(e.selfPosts())
	resp = colored(t, appKey, "canary")
	if g, c := resp.Header.Get("X-Hybrid-Target"), resp.Header.Get("X-Hybrid-Color"); g != "self" || c != "ignored" {
		t.Fatalf("an untrusted canary request went to %q (X-Hybrid-Color %q)", g, c)
	}
	if sp := e.selfPosts(); len(sp) != selfBefore+1 || sp[len(sp)-1].Header.Get("X-Route-Tag") != "" {
		t.Errorf("the untrusted tag reached the upstream")
	}
	if d := ignoredColors(t, gw, "untrusted") - untrusted; d != 1 {
		t.Errorf("colors_ignored_total{reason=untrusted} moved by %v", d)
	}
	if entry := e.accessLog(resp.Header.Get("X-Request-Id")); entry["llm_color"] != nil {
		t.Errorf("an ignored tag was logged as the color: %v", entry["llm_color"])
	}

	// by address: blue trusts loopback, red a range elsewhere
	if resp := colored(t, appKey, "blue"); resp.Header.Get("X-Hybrid-Color") != "blue" || resp.Header.Get("X-Hybrid-Target") != "cloud" {
		t.Errorf("blue from loopback: %q to %q", resp.Header.Get("X-Hybrid-Color"), resp.Header.Get("X-Hybrid-Target"))
	}
	if resp := colored(t, testerKey, "red"); resp.Header.Get("X-Hybrid-Color") != "ignored" || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("red from loopback: %q to %q", resp.Header.Get("X-Hybrid-Color"), resp.Header.Get("X-Hybrid-Target"))
	}

	// a tag no color has
	unknown := ignoredColors(t, gw, "unknown")
	if resp := colored(t, testerKey, "green"); resp.Header.Get("X-Hybrid-Color") != "ignored" || resp.Header.Get("X-Hybrid-Target") != "self" {
		t.Errorf("an unknown tag: %q to %q", resp.Header.Get("X-Hybrid-Color"), resp.Header.Get("X-Hybrid-Target"))
	}
	if d := ignoredColors(t, gw, "unknown") - unknown; d != 1 {
		t.Errorf("colors_ignored_total{reason=unknown} moved by %v", d)
	}
	// an alias without colors, on a gateway with colors: the tag goes nowhere
	cloudFirst := strings.Replace(chatBody, "chat-main", "cloud-first", 1)
	resp, body := post(t, "/v1/chat/completions", cloudFirst, "Authorization", "Bearer "+testerKey, "X-Route-Tag", "canary")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Hybrid-Color") != "ignored" {
		t.Errorf("a tag on an alias without colors: %d, X-Hybrid-Color %q: %s", resp.StatusCode, resp.Header.Get("X-Hybrid-Color"), body)
	}
	if cp := e.cloudPosts(); len(cp) == 0 || cp[len(cp)-1].Header.Get("X-Route-Tag") != "" {
		t.Errorf("the tag reached the upstream of an alias without colors")
	}
	// untagged requests are untouched
	if resp, _ := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer "+testerKey); resp.Header.Get("X-Hybrid-Color") != "" {
		t.Errorf("an untagged request got X-Hybrid-Color %q", resp.Header.Get("X-Hybrid-Color"))
	}
}

// A colored target that fails hands the request to the alias's own
// targets, unless its color says fallback off: then the failure is the
// answer.
func TestColorFallback(t *testing.T) {
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	canary, _, canarySrv, _ := twoClouds(t)
	canary.SetFailures(simulator.Failures{ErrorRate: 1, ErrorStatus: 503})

	e.load(colorBlock(canarySrv, ""))
	resp := colored(t, testerKey, "canary")
	if g := resp.Header.Get("X-Hybrid-Target"); g != "self" || resp.Header.Get("X-Hybrid-Fallback") != "true" {
		t.Errorf("a failed canary fell back to %q (fallback %q)", g, resp.Header.Get("X-Hybrid-Fallback"))
	}

	e.load(colorBlock(canarySrv, "\t\tfallback off"))
	before := len(e.selfPosts())
	r, body := post(t, "/v1/chat/completions", chatBody, "Authorization", "Bearer "+testerKey, "X-Route-Tag", "canary")
	if r.StatusCode == http.StatusOK {
		t.Fatalf("a failed canary without fallback answered 200 from %q", r.Header.Get("X-Hybrid-Target"))
	}
	wantError(t, r, body, http.StatusBadGateway, "all_targets_failed")
	if n := len(e.selfPosts()) - before; n != 0 {
		t.Errorf("with fallback off, the alias's own targets got %d requests", n)
	}
}
