// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"go.uber.org/zap"
)

// A tag counts only from a source its color trusts (a trusted client, a
// client it names, an address in its ranges), and only for a color the
// alias has; any other tag is removed before the request goes upstream
// and the answer says it was ignored.
func TestColorsCountOnlyFromTrustedSources(t *testing.T) {
	s := aliasSetup(t)
	s.Clients = true
	al := aliasOf(t, `{"targets":[{"group":"self","model":"qwen"}],"colors":[`+
		`{"tag":"blue","group":"cloud","model":"gpt-next","trusted_clients":["ci"],"trusted_ranges":["10.1.0.0/16"]}]}`)
	if err := s.Provision("chat", al); err != nil {
		t.Fatal(err)
	}
	p := &ColorPicker{Gateway: "gw", Headers: true, Logger: zap.NewNop()}
	for _, tc := range []struct {
		name, tag, addr string
		cl              *clients.Caller
		counts          bool
	}{
		{"a client the color names", "blue", "192.0.2.1:1000", &clients.Caller{Name: "ci", Known: true}, true},
		{"a trusted client", "blue", "192.0.2.1:1000", &clients.Caller{Name: "ops", Known: true, Trusted: true}, true},
		{"an address in its ranges", "blue", "10.1.2.3:1000", nil, true},
		{"any other client", "blue", "192.0.2.1:1000", &clients.Caller{Name: "app", Known: true}, false},
		{"an address outside", "blue", "10.2.0.1:1000", nil, false},
		{"a color the alias lacks", "green", "10.1.2.3:1000", nil, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}"))
		r.RemoteAddr = tc.addr
		r.Header.Set("X-Route-Tag", tc.tag)
		w := httptest.NewRecorder()
		c := p.Pick(w, r, al, tc.cl, "id")
		switch {
		case tc.counts && (c == nil || c.Tag != "blue" || w.Header().Get("X-Hybrid-Color") != "blue" || r.Header.Get("X-Route-Tag") != "blue"):
			t.Errorf("%s: picked %v, answer says %q, tag kept %q", tc.name, c, w.Header().Get("X-Hybrid-Color"), r.Header.Get("X-Route-Tag"))
		case !tc.counts && (c != nil || w.Header().Get("X-Hybrid-Color") != "ignored" || r.Header.Get("X-Route-Tag") != ""):
			t.Errorf("%s: picked %v, answer says %q, tag kept %q", tc.name, c, w.Header().Get("X-Hybrid-Color"), r.Header.Get("X-Route-Tag"))
		}
	}
}

// A color nobody may use, or one that names clients where there are none,
// is a config error.
func TestColorsNeedSomeoneToTrust(t *testing.T) {
	for js, want := range map[string]string{
		`{"tag":"blue","group":"cloud","model":"m"}`:                                          "nobody may use it",
		`{"tag":"blue","group":"cloud","model":"m","trusted_clients":["ci"]}`:                 "trusted_clients needs clients",
		`{"tag":"blue","group":"cloud","model":"m","trusted_ranges":["10.0.0"]}`:              "neither a CIDR range nor an IP",
		`{"tag":"blue","group":"cloud","model":"m","weight":2,"trusted_ranges":["10.0.0.1"]}`: "do not apply to a color",
	} {
		al := aliasOf(t, `{"targets":[{"group":"self","model":"qwen"}],"colors":[`+js+`]}`)
		if err := aliasSetup(t).Provision("chat", al); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", js, err, want)
		}
	}
}
