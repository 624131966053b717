// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// With prefix caching a conversation's next turn reports the start it
// shares with the turn before as cached: a vLLM in prompt_tokens_details
// and in vllm:prefix_cache_hits_total (of vllm:prefix_cache_queries_total)
// (its Messages API, as vLLM's, counts the whole prompt as input_tokens
// and no cache reads); a cloud only for prompts of 1,024 tokens or more,
// in steps of 128. Without it, none is reported.
func TestPrefixCaching(t *testing.T) {
	system := strings.Repeat("You are a careful coding agent. ", 200)
	turn := func(n int) string {
		msgs := []string{`{"role":"user","content":"` + strings.Repeat("fix the bug ", 20) + `"}`}
		for i := 1; i < n; i++ {
			msgs = append(msgs, `{"role":"assistant","content":"done"}`, `{"role":"user","content":"and the next"}`)
		}
		return `{"model":"m","max_tokens":4,"system":"` + system + `","messages":[` + strings.Join(msgs, ",") + `]}`
	}
	chat := func(body string) string { // the system prompt as the first message
		return strings.Replace(strings.Replace(body, `"system":"`+system+`",`, "", 1), `"messages":[`, `"messages":[{"role":"system","content":"`+system+`"},`, 1)
	}

	_, vllm := newVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"m"}, PrefixCaching: true})
	for _, n := range []int{1, 2} {
		r := post(t, vllm+"/v1/chat/completions", chat(turn(n)))
		prompt, cached := gjson.Get(r.body, "usage.prompt_tokens").Int(), gjson.Get(r.body, "usage.prompt_tokens_details.cached_tokens").Int()
		if n == 1 && cached != 0 || n == 2 && (cached < prompt/2 || cached >= prompt || cached%16 != 0) {
			t.Errorf("vllm chat, turn %d: %d of %d cached: %s", n, cached, prompt, r.body)
		}
	}
	if m := get(t, vllm+"/metrics").body; !strings.Contains(m, `vllm:prefix_cache_hits_total{engine="0",model_name="m"}`) ||
		!strings.Contains(m, `vllm:prefix_cache_queries_total{engine="0",model_name="m"}`) || strings.Contains(m, `vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0`) {
		t.Errorf("the prefix cache's counters: %s", m)
	}
	if r := post(t, vllm+"/v1/messages", turn(3)); gjson.Get(r.body, "usage.cache_read_input_tokens").Exists() || gjson.Get(r.body, "usage.input_tokens").Int() == 0 {
		t.Errorf("vllm messages: %s", r.body)
	}

	_, plain := newVLLM(t, simulator.VLLMConfig{ServedModelNames: []string{"m"}})
	for range 2 {
		if r := post(t, plain+"/v1/chat/completions", chat(turn(2))); gjson.Get(r.body, "usage.prompt_tokens_details").Type != gjson.Null {
			t.Errorf("without prefix caching: %s", r.body)
		}
	}

	cloud := start(t, simulator.NewCloud(simulator.CloudConfig{Models: []string{"m"}, PrefixCaching: true})).URL()
	short := `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi there, how are you doing today? fine?"}]}`
	for i, body := range []string{short, short, chat(turn(1)), chat(turn(2))} {
		r := post(t, cloud+"/v1/chat/completions", body)
		prompt, cached := gjson.Get(r.body, "usage.prompt_tokens").Int(), gjson.Get(r.body, "usage.prompt_tokens_details.cached_tokens").Int()
		if want := i == 3; want != (cached > 0) || cached%128 != 0 || cached > prompt {
			t.Errorf("cloud, request %d: %d of %d cached: %s", i, cached, prompt, r.body)
		}
	}
}
