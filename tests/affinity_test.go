// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// vllmAt is a simulated vLLM and where it listens.
type vllmAt struct {
	v   *simulator.VLLM
	srv *simulator.Server
}

// affineGateway loads the default gateway with its self group over three
// simulated vLLMs of cfg (the env's and two more), with an affinity block
// of the given options.
func affineGateway(t *testing.T, cfg simulator.VLLMConfig, options string) (*env, vllmAt, vllmAt) {
	t.Helper()
	e := newEnv(t, cfg, simulator.CloudConfig{})
	var more [2]vllmAt
	for i := range more {
		more[i].v, more[i].srv = startVLLM(t, cfg)
	}
	block := strings.Replace(defaultGateway, "proxy {SELF}", "proxy {SELF} "+more[0].srv.URL()+" "+more[1].srv.URL(), 1)
	block = strings.Replace(block, "\tkind vllm\n", "\tkind vllm\n\taffinity {\n\t\t"+options+"\n\t}\n", 1)
	e.load(block)
	return e, more[0], more[1]
}

// With prefix affinity a conversation's turns go to one vLLM endpoint of
// three, whose prefix cache then serves its start (the simulators'
// prefix caching: cached_tokens in the answer's usage); the access log
// says the request went by affinity; conversations spread over the
// endpoints; the state shows what the endpoints' prefix caches served.
func TestAffinityKeepsConversationsOnTheirEndpoint(t *testing.T) {
	e, second, third := affineGateway(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, PrefixCaching: true}, "max_load 2")
	srv2, srv3 := second.srv, third.srv

	system := strings.Repeat("You are a careful assistant for the payments team; answer in short sentences. ", 40)
	sims := map[string]*simulator.VLLM{e.selfSrv.Addr(): e.self, srv2.Addr(): second.v, srv3.Addr(): third.v}
	used := map[string]bool{}
	for c := range 9 {
		msgs := fmt.Sprintf(`{"role":"system","content":%q},{"role":"user","content":"conversation %d: what changed in the refund flow?"}`, system, c)
		home := ""
		for turn := range 3 {
			resp, body := post(t, "/v1/chat/completions", `{"model":"chat-main","max_tokens":8,"messages":[`+msgs+`]}`)
			if resp.StatusCode != 200 {
				t.Fatalf("conversation %d, turn %d: %d %s", c, turn, resp.StatusCode, body)
			}
			id := resp.Header.Get("X-Request-Id")
			waitFor(t, "the request's record", func() bool { return e.accessLog(id) != nil })
			rec := e.accessLog(id)
			ep, _ := rec["llm_endpoint"].(string)
			if turn == 0 {
				home = ep
			}
			if ep != home || rec["llm_affinity"] != true {
				t.Errorf("conversation %d, turn %d went to %s (its first to %s): %v", c, turn, ep, home, rec)
			}
			if cached := gjson.GetBytes(body, "usage.prompt_tokens_details.cached_tokens").Int(); turn > 0 && cached == 0 {
				t.Errorf("conversation %d, turn %d read nothing from its endpoint's prefix cache: %s", c, turn, body)
			}
			msgs += `,{"role":"assistant","content":` + gjson.GetBytes(body, "choices.0.message.content").Raw + `},{"role":"user","content":"and then?"}`
		}
		if sims[home] == nil {
			t.Fatalf("conversation %d answered by %q, not one of the group's endpoints", c, home)
		}
		used[home] = true
	}
	if len(used) < 2 {
		t.Errorf("nine conversations all went to %v", used)
	}
	// the state reads each endpoint's prefix cache from vLLM's counters
	waitFor(t, "the endpoints' prefix cache hit rates", func() bool {
		var doc struct {
			Gateways []struct {
				Groups []struct {
					Name      string `json:"name"`
					Endpoints []struct {
						Metrics struct {
							Rate *float64 `json:"prefix_cache_hit_rate"`
						} `json:"metrics"`
					} `json:"endpoints"`
				} `json:"groups"`
			} `json:"gateways"`
		}
		if err := json.Unmarshal(adminGet(t, "/hybrid_llm/state?gateway="+e.gatewayName()), &doc); err != nil || len(doc.Gateways) != 1 {
			return false
		}
		for _, g := range doc.Gateways[0].Groups {
			for _, ep := range g.Endpoints {
				if g.Name == "self" && ep.Metrics.Rate != nil && *ep.Metrics.Rate > 0.3 {
					return true
				}
			}
		}
		return false
	})
}

// A session the client names in the group's session header keys its
// conversation over the prompt: requests of one session go to one
// endpoint whatever their prompts, sessions spread over the endpoints.
func TestAffinityBySessionHeader(t *testing.T) {
	e, _, _ := affineGateway(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}}, "max_load 2\n\t\tsession_header X-Session-Id")
	used := map[string]bool{}
	for s := range 9 {
		home := ""
		for turn := range 3 {
			body := fmt.Sprintf(`{"model":"chat-main","max_tokens":4,"messages":[{"role":"user","content":"request %d of session %d, a prompt of its own"}]}`, turn, s)
			resp, out := post(t, "/v1/chat/completions", body, "X-Session-Id", fmt.Sprintf("session-%d", s))
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			id := resp.Header.Get("X-Request-Id")
			waitFor(t, "the request's record", func() bool { return e.accessLog(id) != nil })
			ep, _ := e.accessLog(id)["llm_endpoint"].(string)
			if turn == 0 {
				home = ep
			}
			if ep != home {
				t.Errorf("session %d, request %d went to %s, its first to %s", s, turn, ep, home)
			}
		}
		used[home] = true
	}
	if len(used) < 2 {
		t.Errorf("nine sessions all went to %v", used)
	}
}

// The vllm_least_load policy keeps a conversation on one upstream in a
// plain reverse_proxy too: it reads the request's body for its key, and
// the upstream still gets the whole body.
func TestAffinityInPlainReverseProxy(t *testing.T) {
	var sims []*simulator.VLLM
	var addrs []string
	for range 3 {
		v, srv := startVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{selfModel}, PrefixCaching: true})
		sims, addrs = append(sims, v), append(addrs, srv.Addr())
	}
	e := newEnv(t, simulator.VLLMConfig{}, simulator.CloudConfig{})
	e.tester = nil
	loadRaw(t, plainGlobals+`http://127.0.0.1:9080 {
	reverse_proxy `+strings.Join(addrs, " ")+` {
		lb_policy vllm_least_load 8 {
			model `+selfModel+`
			affinity {
				max_load 2
			}
		}
	}
}
`)
	system := strings.Repeat("You are the support desk's assistant; cite the policy by number. ", 30)
	holder := func(content string) int {
		n := -1
		for i, v := range sims {
			for _, r := range posts(v.Requests()) {
				if strings.Contains(string(r.Body), content) {
					if !gjson.ValidBytes(r.Body) {
						t.Errorf("upstream %d got a broken body: %.80s", i, r.Body)
					}
					n = i
				}
			}
		}
		return n
	}
	used := map[int]bool{}
	for c := range 9 {
		msgs := fmt.Sprintf(`{"role":"system","content":%q},{"role":"user","content":"ticket %d: my refund is late"}`, system, c)
		home := -1
		for turn := range 3 {
			marker := fmt.Sprintf("ticket %d, turn %d", c, turn)
			resp, body := post(t, "/v1/chat/completions", `{"model":"`+selfModel+`","max_tokens":4,"messages":[`+msgs+`,{"role":"user","content":"`+marker+`"}]}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			at := holder(marker)
			if turn == 0 {
				home = at
			}
			if at != home || at < 0 {
				t.Errorf("ticket %d, turn %d went to upstream %d, its first to %d", c, turn, at, home)
			}
			msgs += `,{"role":"user","content":"` + marker + `"},{"role":"assistant","content":` + gjson.GetBytes(body, "choices.0.message.content").Raw + `}`
		}
		used[home] = true
	}
	if len(used) < 2 {
		t.Errorf("nine conversations all went to %v", used)
	}
}

// A hot conversation spills past the bound: many requests of one
// conversation at once fill its endpoint only to max_load × the mean
// (rounded up to a whole request), far below the red line, and the rest
// go to the next endpoints in its order, which warm.
func TestAffinityHotConversationSpills(t *testing.T) {
	cfg := simulator.VLLMConfig{ServedModelNames: []string{selfModel}, ITL: time.Second}
	e := newEnv(t, cfg, simulator.CloudConfig{})
	var more [2]vllmAt
	for i := range more {
		more[i].v, more[i].srv = startVLLM(t, cfg)
	}
	block := strings.Replace(defaultGateway, "proxy {SELF}", "proxy {SELF} "+more[0].srv.URL()+" "+more[1].srv.URL(), 1)
	e.load(strings.Replace(block, "\tkind vllm\n", "\tkind vllm\n\tmax_num_seqs 16\n\taffinity {\n\t\tmax_load 1.25\n\t}\n", 1))
	waitProbed(t)
	body := `{"model":"chat-main","stream":true,"max_tokens":500,"messages":[{"role":"system","content":"the on-call runbook"},{"role":"user","content":"the same hot question"}]}`
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for range 9 {
		_, stop := holdStream(t, e, "", body)
		stops = append(stops, stop)
	}
	var counts []int
	for _, v := range []*simulator.VLLM{e.self, more[0].v, more[1].v} {
		running, waiting := v.Load()
		counts = append(counts, running+waiting)
	}
	slices.Sort(counts)
	// nine at once over three endpoints: the conversation's own takes at
	// most ceil(1.25 × (9/3 + 1)) = 5, not its red line of 16
	if counts[2] > 5 || counts[1] == 0 || counts[0]+counts[1]+counts[2] != 9 {
		t.Errorf("nine requests of one conversation in flight per endpoint: %v", counts)
	}
}
