// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// aliasSetup is the setup of a gateway whose groups are a cloud group
// "cloud" and a vLLM group "self".
func aliasSetup(t *testing.T) *AliasSetup {
	t.Helper()
	return &AliasSetup{Gateway: "gw", Clock: fakeClock(t), Logger: zap.NewNop(), Used: map[string]bool{},
		Groups: map[string]*upstream.Group{
			"cloud": {Kind: upstream.KindOpenAI, Run: upstream.GroupRun{Name: "cloud", Proxy: new(reverseproxy.Handler)}},
			"self": {Kind: upstream.KindVLLM, Run: upstream.GroupRun{Name: "self", Proxy: &reverseproxy.Handler{Upstreams: reverseproxy.UpstreamPool{{Dial: "10.0.0.1:8000"}, {Dial: "10.0.0.2:8000"}}}},
				VLLM: &upstream.VLLMGroup{Name: "self"}},
		}}
}

func aliasOf(t *testing.T, js string) *Alias {
	t.Helper()
	al := new(Alias)
	if err := json.Unmarshal([]byte(js), al); err != nil {
		t.Fatal(err)
	}
	return al
}

// A provisioned target knows its group, its time limits (the defaults
// where it sets none, none where it says 0), the statuses it falls back
// on, and whether its model is the alias's own name; the groups its
// targets name are marked used.
func TestAliasProvisionResolvesItsTargets(t *testing.T) {
	s := aliasSetup(t)
	al := aliasOf(t, `{"targets":[{"group":"self","model":"qwen","idle_timeout":0},{"group":"cloud","model":"chat","fallback_on":[404,5]}]}`)
	if err := s.Provision("chat", al); err != nil {
		t.Fatal(err)
	}
	self, cloud := al.Targets[0], al.Targets[1]
	if self.Upstream != s.Groups["self"] || cloud.Upstream != s.Groups["cloud"] || !s.Used["self"] || !s.Used["cloud"] {
		t.Fatalf("groups not resolved: %v %v, used %v", self.Upstream, cloud.Upstream, s.Used)
	}
	if self.Run.Timeout != DefaultAttemptTimeout || self.Run.FirstByte != DefaultFirstByteTimeout || self.Run.Idle != 0 {
		t.Errorf("limits %v %v %v, want the defaults and no idle limit", self.Run.Timeout, self.Run.FirstByte, self.Run.Idle)
	}
	for status, want := range map[int]bool{429: true, 503: true, 401: true, 400: false, 404: false} {
		if self.FallsBackOn(status) != want {
			t.Errorf("by default %d falls back: %v, want %v", status, !want, want)
		}
	}
	for status, want := range map[int]bool{404: true, 500: true, 429: false} {
		if cloud.FallsBackOn(status) != want {
			t.Errorf("fallback_on [404 5]: %d falls back: %v, want %v", status, !want, want)
		}
	}
	if self.Run.SameName || !cloud.Run.SameName || string(self.Run.ModelJSON) != `"qwen"` || string(al.ModelJSON) != `"chat"` {
		t.Errorf("names: self same %v, cloud same %v, model %s, alias %s", self.Run.SameName, cloud.Run.SameName, self.Run.ModelJSON, al.ModelJSON)
	}
	if self.Seen.Metrics == nil {
		t.Error("no metric series resolved")
	}
	if self.Run.Retries != 1 || cloud.Run.Retries != 0 {
		t.Errorf("retries by default: %d on a vllm group of two, %d on a cloud; want 1 and 0", self.Run.Retries, cloud.Run.Retries)
	}

	up := aliasOf(t, `{"response_model":"upstream","targets":[{"group":"cloud","model":"gpt"}]}`)
	if err := aliasSetup(t).Provision("chat", up); err != nil || up.ModelJSON != nil {
		t.Errorf("response_model upstream: the alias's answers carry %s (%v)", up.ModelJSON, err)
	}
}

// A config the gateway cannot serve is refused with the alias, the
// target and what is wrong.
func TestAliasProvisionRefuses(t *testing.T) {
	for js, want := range map[string]string{
		`{"targets":[]}`: `alias "chat": no targets`,
		`{"targets":[{"group":"nope","model":"m"}]}`:                                                     `target 0 (group "nope"): unknown group "nope"`,
		`{"targets":[{"group":"cloud"}]}`:                                                                `a model name is required`,
		`{"targets":[{"group":"cloud","model":"m","retries":-1}]}`:                                       `must not be negative`,
		`{"targets":[{"group":"cloud","model":"m","timeout":-1000000000}]}`:                              `timeout`,
		`{"targets":[{"group":"cloud","model":"m","fallback_on":[200]}]}`:                                `200`,
		`{"response_model":"both","targets":[{"group":"cloud","model":"m"}]}`:                            `response_model`,
		`{"targets":[{"group":"cloud","model":"m","weight":2}]}`:                                         `outside a weighted set`,
		`{"sets":{"s":{}},"targets":[{"group":"cloud","model":"m"}]}`:                                    `settings for set "s"`,
		`{"targets":[{"group":"cloud","model":"m"}],"mirrors":[{"group":"self","model":"q","ratio":2}]}`: `ratio`,
	} {
		err := aliasSetup(t).Provision("chat", aliasOf(t, js))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", js, err, want)
		}
	}
}

// A mirror's copies are bounded by a timeout of their own when its target
// sets none.
func TestMirrorGetsItsDefaultTimeout(t *testing.T) {
	al := aliasOf(t, `{"targets":[{"group":"cloud","model":"m"}],"mirrors":[{"group":"self","model":"q","ratio":0.1}]}`)
	if err := aliasSetup(t).Provision("chat", al); err != nil {
		t.Fatal(err)
	}
	if m := al.Mirrors[0]; time.Duration(*m.Timeout) != DefaultMirrorTimeout || m.Upstream == nil {
		t.Errorf("mirror timeout %v, group %v", m.Timeout, m.Upstream)
	}
}
