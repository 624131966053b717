// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/simulator"
)

// promptOf returns a chat body whose prompt is estimated at tokens tokens,
// asking for maxTokens (0: not set).
func promptOf(tokens, maxTokens int) string {
	extra := ""
	if maxTokens > 0 {
		extra = fmt.Sprintf(`,"max_tokens":%d`, maxTokens)
	}
	return `{"messages":[{"role":"user","content":"` + strings.Repeat("abcd", tokens) + `"}]` + extra + `}`
}

// kvUsage reads vllm:kv_cache_usage_perc of engine from /metrics.
func kvUsage(t *testing.T, url, engine string) float64 {
	t.Helper()
	return value(t, scrape(t, url), "vllm:kv_cache_usage_perc", map[string]string{"engine": engine})
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func wantKV(t *testing.T, url, engine string, want float64, when string) {
	t.Helper()
	if got := kvUsage(t, url, engine); !near(got, want) {
		t.Errorf("%s: engine %s kv usage = %v, want %v", when, engine, got, want)
	}
}

// Usage grows with the running requests and their prompt lengths, is
// clamped at 1 with a preemption counted when a prompt does not fit, and
// falls back as the requests end.
func TestVLLMKVCacheLoad(t *testing.T) {
	v, url := newVLLM(t, simulator.VLLMConfig{MaxNumSeqs: 4, KVCacheTokens: 2048, TTFT: time.Hour})
	if got := v.Config().KVCacheTokens; got != 2048 {
		t.Errorf("KVCacheTokens = %d", got)
	}
	mfs := scrape(t, url)
	if b := labels(mfs["vllm:cache_config_info"].GetMetric()[0])["num_gpu_blocks"]; b != "128" {
		t.Errorf("num_gpu_blocks = %s, want 2048/16", b)
	}
	preemptions := func() float64 {
		return value(t, scrape(t, url), "vllm:num_preemptions_total", map[string]string{"engine": "0"})
	}
	chat := url + "/v1/chat/completions"
	var cancels []context.CancelFunc
	var chans []<-chan response
	send := func(body string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		chans = append(chans, background(ctx, chat, body))
		waitLoad(t, v, len(chans), 0)
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()

	wantKV(t, url, "0", 0, "idle")
	send(promptOf(960, 0)) // 60 blocks
	wantKV(t, url, "0", 60.0/128, "one long prompt")
	send(promptOf(960, 0))
	wantKV(t, url, "0", 120.0/128, "two long prompts")
	send(chatBody) // 4 tokens: 1 block
	wantKV(t, url, "0", 121.0/128, "and a short one")
	if got := preemptions(); got != 0 {
		t.Errorf("preemptions = %v before the cache is full", got)
	}
	send(promptOf(960, 0)) // 60 more blocks do not fit in the 7 left
	wantKV(t, url, "0", 1, "over capacity")
	if got := preemptions(); got != 1 {
		t.Errorf("preemptions = %v, want 1", got)
	}
	if st := v.KVStatus(); st.Blocks != 128 || len(st.ModelUsage) != 1 || st.ModelUsage[0] != 1 || st.Usage[0] != 1 || st.Floor != 0 {
		t.Errorf("KVStatus = %+v", st)
	}

	// free the fourth (the one over capacity), then the others in order
	cancels[3]()
	recv(t, chans[3])
	waitLoad(t, v, 3, 0)
	wantKV(t, url, "0", 121.0/128, "after the fourth ended")
	cancels[0]()
	recv(t, chans[0])
	waitLoad(t, v, 2, 0)
	wantKV(t, url, "0", 61.0/128, "after the first ended")
	cancels[1]()
	recv(t, chans[1])
	cancels[2]()
	recv(t, chans[2])
	waitLoad(t, v, 0, 0)
	wantKV(t, url, "0", 0, "all ended")
	if got := preemptions(); got != 1 {
		t.Errorf("preemptions = %v after the requests ended", got)
	}

	// A request that completes leaves nothing behind.
	v2, url2 := newVLLM(t, simulator.VLLMConfig{KVCacheTokens: 2048})
	expect(t, post(t, url2+"/v1/chat/completions", promptOf(960, 100)), 200, "")
	waitLoad(t, v2, 0, 0)
	wantKV(t, url2, "0", 0, "after a completed request")
}

// A running request holds blocks for the tokens generated so far: one at
// its first token, then one more every ITL of the simulator's clock, up to
// its max_tokens.
func TestVLLMKVCacheDecode(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	v, url := newVLLM(t, simulator.VLLMConfig{KVCacheTokens: 1600, ITL: time.Hour, Clock: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// 160 prompt tokens = 10 blocks; with its first token, 161 tokens = 11
	// blocks. The real ITL of an hour keeps it running.
	ch := background(ctx, url+"/v1/chat/completions", promptOf(160, 50))
	waitFor(t, "the first token", func() bool { return near(v.KVStatus().ModelUsage[0], 0.11) })
	wantKV(t, url, "0", 0.11, "first token")
	clock.Advance(15 * time.Hour) // 16 tokens: 176 = 11 blocks
	wantKV(t, url, "0", 0.11, "16 tokens")
	clock.Advance(time.Hour) // 17 tokens: 177 = 12 blocks
	wantKV(t, url, "0", 0.12, "17 tokens")
	clock.Advance(100 * time.Hour) // all 50: 210 = 14 blocks
	wantKV(t, url, "0", 0.14, "all 50 tokens")
	cancel()
	recv(t, ch)
	waitLoad(t, v, 0, 0)
	wantKV(t, url, "0", 0, "after the request")
}

// The floor lifts every engine's reported usage to at least its value;
// a climb moves it linearly on the simulator's clock.
func TestVLLMKVFloor(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	v, url := newVLLM(t, simulator.VLLMConfig{Engines: 2, MaxNumSeqs: 1, KVCacheTokens: 1600, TTFT: time.Hour, Clock: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := background(ctx, url+"/v1/chat/completions", promptOf(480, 0)) // 30 blocks of 100
	waitLoad(t, v, 1, 0)
	busy, idle := "0", "1"
	if value(t, scrape(t, url), "vllm:num_requests_running", map[string]string{"engine": "1"}) == 1 {
		busy, idle = "1", "0"
	}
	both := func(b, i float64, when string) {
		t.Helper()
		wantKV(t, url, busy, b, when)
		wantKV(t, url, idle, i, when)
	}
	both(0.3, 0, "no floor")

	v.SetKVFloor(0.2)
	both(0.3, 0.2, "floor 0.2")
	v.SetKVFloor(0.5)
	both(0.5, 0.5, "floor 0.5")

	v.ClimbKV(0.9, 10*time.Second)
	both(0.5, 0.5, "climb at t0")
	clock.Advance(5 * time.Second)
	both(0.7, 0.7, "climb halfway")
	if st := v.KVStatus(); !near(st.Floor, 0.7) || st.From != 0.5 || st.ClimbTo != 0.9 || st.Over != 10*time.Second ||
		st.Remaining != 5*time.Second || len(st.Usage) != 2 || !near(st.Usage[0], 0.7) {
		t.Errorf("KVStatus halfway = %+v", st)
	}
	clock.Advance(5 * time.Second)
	both(0.9, 0.9, "climb done")
	clock.Advance(time.Hour)
	both(0.9, 0.9, "an hour after the climb")
	if st := v.KVStatus(); st.Remaining != 0 {
		t.Errorf("Remaining after the climb = %v", st.Remaining)
	}

	// a climb starts from where the floor is, and may descend
	v.ClimbKV(0.1, 4*time.Second)
	clock.Advance(2 * time.Second)
	both(0.5, 0.5, "descending halfway")
	clock.Advance(2 * time.Second)
	both(0.3, 0.1, "descended")

	v.SetKVFloor(2) // clamped
	both(1, 1, "floor clamped to 1")
	v.ClimbKV(-1, 0) // at once, clamped
	both(0.3, 0, "climb to 0 at once")
	v.SetKVFloor(0)
	both(0.3, 0, "floor removed")

	cancel()
	recv(t, ch)
	waitLoad(t, v, 0, 0)
	both(0, 0, "idle")
}

// The defaults: MaxNumSeqs × 2048 tokens, at least one full context.
func TestVLLMKVCacheDefaults(t *testing.T) {
	for _, tc := range []struct {
		cfg  simulator.VLLMConfig
		want int
	}{
		{simulator.VLLMConfig{}, 256 * 2048},
		{simulator.VLLMConfig{MaxNumSeqs: 4}, 32768},
		{simulator.VLLMConfig{MaxNumSeqs: 4, MaxModelLen: 4096}, 8192},
		{simulator.VLLMConfig{KVCacheTokens: 100}, 100},
	} {
		if got := simulator.NewVLLM(tc.cfg).Config().KVCacheTokens; got != tc.want {
			t.Errorf("%+v: KVCacheTokens = %d, want %d", tc.cfg, got, tc.want)
		}
	}
	b, err := json.Marshal(simulator.NewVLLM(simulator.VLLMConfig{KVCacheTokens: 1600}).KVStatus())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"floor":0,"from":0,"climb_to":0,"over":"0s","remaining":"0s","kv_cache_usage_perc":[0],"model_usage":[0],"num_gpu_blocks":100}`; string(b) != want {
		t.Errorf("KVStatus JSON\n got: %s\nwant: %s", b, want)
	}
}
