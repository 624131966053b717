// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"fmt"
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

// promptCached posts body to url and returns its cached and prompt tokens.
func promptCached(t *testing.T, url, body string) (cached, prompt int64) {
	t.Helper()
	r := post(t, url, body)
	expect(t, r, 200, "")
	return gjson.Get(r.body, "usage.prompt_tokens_details.cached_tokens").Int(), gjson.Get(r.body, "usage.prompt_tokens").Int()
}

// cacheQueries returns vllm:prefix_cache_queries_total of each engine.
func cacheQueries(t *testing.T, url string, engines int) []float64 {
	t.Helper()
	mfs := scrape(t, url)
	out := make([]float64, engines)
	for e := range out {
		out[e] = value(t, mfs, "vllm:prefix_cache_queries_total", map[string]string{"engine": fmt.Sprint(e)})
	}
	return out
}

// Each engine has its own prefix cache: a conversation's second turn is
// served from the cache of the engine that ran its first, not from
// another engine's nor another simulator's. Idle engines take requests
// round-robin, so the turns alternate between the two.
func TestPrefixCachePerEngine(t *testing.T) {
	system := strings.Repeat("You are a careful coding agent. ", 40)
	turn1 := `{"max_tokens":1,"messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"fix the bug"}]}`
	turn2 := strings.Replace(turn1, `"fix the bug"}`, `"fix the bug"},{"role":"assistant","content":"done"},{"role":"user","content":"and the next"}`, 1)

	v, url := newVLLM(t, simulator.VLLMConfig{Engines: 2, PrefixCaching: true})
	chat := url + "/v1/chat/completions"
	// engineOf sends body and returns the engine that ran it (the one
	// whose prefix cache was queried) and its cached tokens.
	engineOf := func(body string) (int, int64) {
		t.Helper()
		before := cacheQueries(t, url, 2)
		cached, prompt := promptCached(t, chat, body)
		waitLoad(t, v, 0, 0)
		after := cacheQueries(t, url, 2)
		for e := range after {
			if after[e]-before[e] == float64(prompt) {
				return e, cached
			}
		}
		t.Fatalf("no engine counted the prompt's %d tokens: %v -> %v", prompt, before, after)
		return -1, 0
	}

	first, cached := engineOf(turn1)
	if cached != 0 {
		t.Errorf("turn 1 on engine %d: %d cached", first, cached)
	}
	other, cached := engineOf(turn2)
	if other == first || cached != 0 {
		t.Errorf("turn 2 on engine %d (turn 1 on %d): %d cached, want a miss on the other engine", other, first, cached)
	}
	again, cached := engineOf(turn2)
	if again != first || cached == 0 {
		t.Errorf("turn 2 again on engine %d (turn 1 on %d): %d cached, want a hit", again, first, cached)
	}
	mfs := scrape(t, url)
	if hits := value(t, mfs, "vllm:prefix_cache_hits_total", map[string]string{"engine": fmt.Sprint(first)}); hits != float64(cached) {
		t.Errorf("engine %d hits = %v, want %d", first, hits, cached)
	}
	if hits := value(t, mfs, "vllm:prefix_cache_hits_total", map[string]string{"engine": fmt.Sprint(other)}); hits != 0 {
		t.Errorf("engine %d hits = %v, want 0", other, hits)
	}

	_, elsewhere := newVLLM(t, simulator.VLLMConfig{PrefixCaching: true})
	if cached, _ := promptCached(t, elsewhere+"/v1/chat/completions", turn2); cached != 0 {
		t.Errorf("another simulator: %d cached", cached)
	}
}

// An engine's prefix cache holds KVCacheTokens/16 blocks of 64 prompt
// bytes and evicts the least recently used: once other prompts fill it,
// a prompt not used since is gone, while one used again just before
// stays.
func TestPrefixCacheEvictsLeastRecentlyUsed(t *testing.T) {
	// 256 tokens: 16 blocks. Each prompt's JSON string is 4 blocks and a
	// part of one.
	_, url := newVLLM(t, simulator.VLLMConfig{KVCacheTokens: 256, PrefixCaching: true})
	completions := url + "/v1/completions"
	prompt := func(name string) string {
		text := name + strings.Repeat(" lorem", 300)[:4*64+8-len(name)]
		return `{"max_tokens":1,"prompt":"` + text + `"}`
	}
	cached := func(name string) int64 {
		t.Helper()
		c, _ := promptCached(t, completions, prompt(name))
		return c
	}
	for _, name := range []string{"A", "B"} {
		if c := cached(name); c != 0 {
			t.Fatalf("%s, first time: %d cached", name, c)
		}
	}
	if c := cached("A"); c == 0 {
		t.Fatalf("A, second time: nothing cached")
	}
	// 12 more blocks: the cache's 16 are full, B's 4 (used least
	// recently) are evicted.
	for _, name := range []string{"C", "D", "E"} {
		if c := cached(name); c != 0 {
			t.Fatalf("%s: %d cached", name, c)
		}
	}
	if c := cached("A"); c == 0 {
		t.Errorf("A, used before C, D and E came: evicted")
	}
	if c := cached("B"); c != 0 {
		t.Errorf("B, not used since C, D and E came: %d cached, want it evicted", c)
	}
}
