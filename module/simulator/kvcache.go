// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultKVTokensPerSeq is the default KV-cache capacity per slot: unless
// VLLMConfig.KVCacheTokens says otherwise, each engine holds MaxNumSeqs ×
// DefaultKVTokensPerSeq tokens, and at least one full MaxModelLen context.
const DefaultKVTokensPerSeq = 2048

// kvCache models each engine's paged KV cache, the way vLLM's V1 block
// manager accounts for it: a fixed number of blocks of vllmBlockSize
// tokens per engine, and every running request holding the blocks for its
// prompt (from admission, as prefill allocates them) plus the tokens it
// has generated so far (from its first token on, one every ITL of the
// clock). Usage is computed when asked, from the clock, so nothing ticks.
//
// On top of the model sits the operator's floor (SetKVFloor, ClimbKV):
// the reported usage is max(model, floor).
type kvCache struct {
	clock   func() time.Time
	itl     time.Duration
	blocks  int // per engine
	engines []kvEngine
	floor   atomic.Pointer[kvRamp] // nil: no floor
}

type kvEngine struct {
	mu    sync.Mutex
	seqs  []*kvSeq
	bound int // Σ blocks of prompt+all output over seqs, the most they can hold
	// preempt counts requests admitted when the free blocks could not hold
	// their prompt (vllm:num_preemptions_total).
	preempt prometheus.Counter
}

// kvSeq is one running request's hold on its engine's cache.
type kvSeq struct {
	engine         int
	idx            int // in kvEngine.seqs
	prompt, tokens int
	decoding       bool // guarded by kvEngine.mu, like decodeAt
	decodeAt       time.Time
}

// kvRamp is the floor: from at start, moving linearly to to over over.
type kvRamp struct {
	from, to float64
	start    time.Time
	over     time.Duration
}

func (r *kvRamp) at(now time.Time) float64 {
	if r == nil {
		return 0
	}
	el := now.Sub(r.start)
	switch {
	case r.over <= 0 || el >= r.over:
		return r.to
	case el <= 0:
		return r.from
	}
	return r.from + (r.to-r.from)*(float64(el)/float64(r.over))
}

func blocksFor(tokens int) int { return (tokens + vllmBlockSize - 1) / vllmBlockSize }

func newKVCache(engines, tokens int, itl time.Duration, clock func() time.Time) *kvCache {
	return &kvCache{clock: clock, itl: itl, blocks: max(tokens/vllmBlockSize, 1), engines: make([]kvEngine, engines)}
}

// generated returns how many tokens s has generated at now; e.mu held.
func (k *kvCache) generated(s *kvSeq, now time.Time) int {
	if !s.decoding || s.tokens <= 0 {
		return 0
	}
	if k.itl <= 0 {
		return s.tokens
	}
	el := max(now.Sub(s.decodeAt), 0)
	steps := int64(el / k.itl)
	if steps >= int64(s.tokens-1) {
		return s.tokens
	}
	return 1 + int(steps)
}

// used returns the blocks engine e's requests hold at now; e.mu held.
func (k *kvCache) used(e *kvEngine, now time.Time) int {
	n := 0
	for _, s := range e.seqs {
		n += blocksFor(s.prompt + k.generated(s, now))
	}
	return n
}

// admit registers a request admitted to engine with prompt tokens and
// tokens to generate. When the free blocks cannot hold its prompt, it
// counts a preemption: a real vLLM would evict a running request to make
// room; the simulator lets both run and clamps the usage at 1.
func (k *kvCache) admit(engine, prompt, tokens int) *kvSeq {
	s := &kvSeq{engine: engine, prompt: prompt, tokens: tokens}
	need := blocksFor(prompt)
	e := &k.engines[engine]
	e.mu.Lock()
	// bound over-estimates what the others hold; only when it leaves no
	// room is the exact count needed.
	preempted := e.bound+need > k.blocks && k.used(e, k.clock())+need > k.blocks
	s.idx = len(e.seqs)
	e.seqs = append(e.seqs, s)
	e.bound += blocksFor(prompt + tokens)
	e.mu.Unlock()
	if preempted && e.preempt != nil {
		e.preempt.Inc()
	}
	return s
}

// decode marks s's first token as generated now.
func (k *kvCache) decode(s *kvSeq) {
	e := &k.engines[s.engine]
	e.mu.Lock()
	s.decoding, s.decodeAt = true, k.clock()
	e.mu.Unlock()
}

// free releases s's blocks.
func (k *kvCache) free(s *kvSeq) {
	e := &k.engines[s.engine]
	e.mu.Lock()
	last := len(e.seqs) - 1
	e.seqs[s.idx] = e.seqs[last]
	e.seqs[s.idx].idx = s.idx
	e.seqs[last] = nil
	e.seqs = e.seqs[:last]
	e.bound -= blocksFor(s.prompt + s.tokens)
	e.mu.Unlock()
}

// modelUsage returns each engine's usage from its requests alone, in 0..1.
func (k *kvCache) modelUsage(now time.Time) []float64 {
	out := make([]float64, len(k.engines))
	for i := range k.engines {
		e := &k.engines[i]
		e.mu.Lock()
		used := k.used(e, now)
		e.mu.Unlock()
		out[i] = min(float64(used)/float64(k.blocks), 1)
	}
	return out
}

// clampUsage maps a requested usage into 0..1; NaN is 0.
func clampUsage(u float64) float64 {
	if math.IsNaN(u) {
		return 0
	}
	return min(max(u, 0), 1)
}

func (k *kvCache) setFloor(u float64) {
	u = clampUsage(u)
	k.floor.Store(&kvRamp{from: u, to: u, start: k.clock()})
}

func (k *kvCache) climb(to float64, over time.Duration) {
	now := k.clock()
	from := k.floor.Load().at(now)
	k.floor.Store(&kvRamp{from: from, to: clampUsage(to), start: now, over: max(over, 0)})
}

// KVStatus is the KV-cache floor and the usage it gives, as GET /_sim/kv
// reports them.
type KVStatus struct {
	// Floor is the floor now: every engine reports at least this usage.
	Floor float64
	// From and ClimbTo are the floor when the last SetKVFloor or ClimbKV
	// took effect and the floor it moves to, linearly over Over of the
	// simulator's clock; Remaining is what is left of Over. Without a
	// climb From and ClimbTo are both the floor and Over is 0.
	From, ClimbTo   float64
	Over, Remaining time.Duration
	// Usage is each engine's vllm:kv_cache_usage_perc now: the larger of
	// ModelUsage and Floor.
	Usage []float64
	// ModelUsage is each engine's usage from its running requests alone.
	ModelUsage []float64
	// Blocks is the number of KV-cache blocks per engine (num_gpu_blocks).
	Blocks int
}

type kvStatusJSON struct {
	Floor      float64   `json:"floor"`
	From       float64   `json:"from"`
	ClimbTo    float64   `json:"climb_to"`
	Over       string    `json:"over"`
	Remaining  string    `json:"remaining"`
	Usage      []float64 `json:"kv_cache_usage_perc"`
	ModelUsage []float64 `json:"model_usage"`
	Blocks     int       `json:"num_gpu_blocks"`
}

// MarshalJSON encodes s as {"floor":0.5,"from":0.05,"climb_to":0.95,
// "over":"10s","remaining":"5s","kv_cache_usage_perc":[0.5],
// "model_usage":[0.01],"num_gpu_blocks":32768}.
func (s KVStatus) MarshalJSON() ([]byte, error) {
	return json.Marshal(kvStatusJSON{
		Floor: s.Floor, From: s.From, ClimbTo: s.ClimbTo,
		Over: s.Over.String(), Remaining: s.Remaining.String(),
		Usage: s.Usage, ModelUsage: s.ModelUsage, Blocks: s.Blocks,
	})
}

func (k *kvCache) status() KVStatus {
	now := k.clock()
	r := k.floor.Load()
	st := KVStatus{Blocks: k.blocks, ModelUsage: k.modelUsage(now)}
	if r != nil {
		st.Floor, st.From, st.ClimbTo, st.Over = r.at(now), r.from, r.to, r.over
		st.Remaining = min(max(r.over-now.Sub(r.start), 0), r.over)
	}
	st.Usage = make([]float64, len(st.ModelUsage))
	for i, u := range st.ModelUsage {
		st.Usage[i] = max(u, st.Floor)
	}
	return st
}

// kvCollector exports vllm:kv_cache_usage_perc, computed at scrape time.
type kvCollector struct {
	k     *kvCache
	model string
	desc  *prometheus.Desc
}

func newKVCollector(k *kvCache, model string) *kvCollector {
	return &kvCollector{k: k, model: model, desc: prometheus.NewDesc("vllm:kv_cache_usage_perc",
		"KV-cache usage. 1 means 100 percent usage.", []string{"model_name", "engine"}, nil)}
}

func (c *kvCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *kvCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.k.clock()
	floor := c.k.floor.Load().at(now)
	for e, u := range c.k.modelUsage(now) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, max(u, floor), c.model, strconv.Itoa(e))
	}
}
