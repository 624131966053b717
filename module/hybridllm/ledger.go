// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// CostConfig is a group's cost model. A vllm group has a fixed cost: its
// GPUs at a monthly price. An openai group is priced per million tokens
// (input and output) or per second of compute.
type CostConfig struct {
	// GPUs behind the group (kind vllm), all endpoints together.
	GPUs float64 `json:"gpus,omitempty"`

	// The monthly cost of one GPU in USD, all in: amortization, hosting,
	// power, operations (kind vllm).
	GPUCostPerMonth float64 `json:"gpu_cost_per_month,omitempty"`

	// USD per million input (prompt) tokens (kind openai).
	InputPerMillion float64 `json:"input_per_million,omitempty"`

	// USD per million input tokens the provider served from its prompt
	// cache (usage.prompt_tokens_details.cached_tokens), when it bills
	// them apart (kind openai). Default: the input price.
	CachedInputPerMillion float64 `json:"cached_input_per_million,omitempty"`

	// USD per million output (completion) tokens (kind openai).
	OutputPerMillion float64 `json:"output_per_million,omitempty"`

	// USD per second of compute (kind openai), instead of token prices:
	// a request costs its duration times this.
	PerSecond float64 `json:"per_second,omitempty"`
}

func (cc *CostConfig) validate(kind string) error {
	for _, v := range []float64{cc.GPUs, cc.GPUCostPerMonth, cc.InputPerMillion, cc.OutputPerMillion, cc.PerSecond, cc.CachedInputPerMillion} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("cost values must be finite and not negative")
		}
	}
	switch kind {
	case KindVLLM:
		if cc.InputPerMillion != 0 || cc.OutputPerMillion != 0 || cc.PerSecond != 0 || cc.CachedInputPerMillion != 0 {
			return fmt.Errorf("a vllm group's cost is gpus and gpu_cost_per_month")
		}
		if cc.GPUs == 0 {
			return fmt.Errorf("cost needs gpus")
		}
	case KindOpenAI:
		if cc.GPUs != 0 || cc.GPUCostPerMonth != 0 {
			return fmt.Errorf("an openai group's cost is input_per_million/output_per_million or per_second")
		}
		if cc.PerSecond != 0 && (cc.InputPerMillion != 0 || cc.OutputPerMillion != 0) {
			return fmt.Errorf("price per second or per token, not both")
		}
	}
	return nil
}

// requestCost is what one cloud request costs; cached is the part of
// the prompt served from the provider's cache.
func (cc *CostConfig) requestCost(prompt, completion, cached int64, dur time.Duration) float64 {
	if cc.PerSecond > 0 {
		return dur.Seconds() * cc.PerSecond
	}
	cachedPrice := cc.InputPerMillion
	if cc.CachedInputPerMillion > 0 {
		cachedPrice = cc.CachedInputPerMillion
	}
	cached = min(max(cached, 0), prompt)
	return (float64(prompt-cached)*cc.InputPerMillion + float64(cached)*cachedPrice + float64(completion)*cc.OutputPerMillion) / 1e6
}

// The live ledger: the demand in GPU equivalents and how it was split,
// the tokens, the spend and each client's share, in one-minute buckets for
// 31 days, across config reloads and, through Caddy's storage, restarts.
const (
	ledgerTick    = time.Second
	ledgerBucket  = time.Minute
	ledgerBuckets = 31 * 24 * 60
)

// ledgerBucketData is one bucket of the ledger.
type ledgerBucketData struct {
	start             time.Time
	dur               time.Duration
	selfSecs, cloudGS float64 // GPU-equivalent seconds
	peak              float64
	promptTokens      int64
	completionTokens  int64
	selfTokens        int64
	cloudUSD          float64
	shadow            cost.Validation // mirror copies, outside the business bill
	clients           []clientUse     // each client's share, with clients
}

// in reports whether the bucket falls in [from, to): a window takes the
// bucket its start is in, and the unfinished one it ends in.
func (b *ledgerBucketData) in(from, to time.Time) bool {
	return !b.start.Before(from.Truncate(ledgerBucket)) && b.start.Before(to)
}

// ledger is a gateway's record of demand and spend; it lives in shared
// state (by gateway name) so that it outlives reloads.
type ledger struct {
	mu      sync.Mutex
	buckets []ledgerBucketData // ring, oldest first once full
	next    int
	current *Gateway    // the gateway whose groups the sampler reads
	clock   clock.Clock // the first gateway's; the ledger outlives reloads
	// every provisioned instance of the gateway, oldest first: when a
	// new config fails to start, the running one is current again
	instances []*Gateway
	cancel    context.CancelFunc

	perToken   atomic.Uint64 // float64 bits
	perTokenAt atomic.Int64
	wg         sync.WaitGroup

	// the demand now, in GPU equivalents (see occupy), and when it was
	// last integrated into the buckets
	curSelf, curCloud float64
	lastAt            time.Time
	// the self-hosted GPUs: what self-hosted requests in flight beyond
	// them wait in vLLM's queues, demand the GPUs are not serving
	selfGPUs float64
	// where it persists, and from when it has not been saved yet
	store   *ledgerStore
	savedAt time.Time
	// with file_system storage: every change, as it happens (see
	// journal_books.go), and the demand journaled up to when
	journal     *journal.Journal
	journaledAt time.Time
}

var ledgers = reload.NewPool[*ledger]()

func (l *ledger) Destruct() error {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
	}
	// the last minutes, for the next start
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t := l.clock.Now()
	l.mu.Lock()
	l.advanceLocked(t)
	l.mu.Unlock()
	l.save(ctx, l.savedAt, t)
	if l.journal != nil {
		// what came after the save is in it, for the next start
		l.journal.Close()
	}
	return nil
}

// acquireLedger returns the gateway's ledger, starting its sampler; a new
// one reads back what Caddy's storage keeps of the gateway's last 31 days.
func acquireLedger(g *Gateway) *ledger {
	l, made, _ := ledgers.Acquire(g.Name, func() (*ledger, error) { return &ledger{clock: g.clock}, nil })
	if made && g.storage != nil && g.ownsBooks {
		l.store = newLedgerStore(g.storage, g.Name, instanceName(), g.logger)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l.savedAt = l.clock.Now()
		days := l.load(ctx, l.savedAt)
		cancel()
		l.startJournal(g, days)
	}
	l.mu.Lock()
	l.instances = append(l.instances, g)
	l.current = g
	l.advanceLocked(l.clock.Now())
	l.selfGPUs = g.selfGPUs
	l.mu.Unlock()
	if made {
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		var ticks int
		loop.Loop{Name: "ledger sampler", Every: ledgerTick, Logger: g.logger}.Go(ctx, &l.wg, func(ctx context.Context) {
			if ticks++; ticks%int(ledgerSaveEvery/ledgerTick) == 0 {
				l.sampleAndSave(ctx)
			} else {
				l.sample()
			}
		})
	}
	return l
}

func releaseLedger(g *Gateway) {
	l := g.ledger
	l.mu.Lock()
	if i := slices.Index(l.instances, g); i >= 0 {
		l.instances = slices.Delete(l.instances, i, i+1)
	}
	l.current = nil
	if n := len(l.instances); n > 0 {
		l.current = l.instances[n-1]
	}
	l.mu.Unlock()
	_ = ledgers.Release(g.Name)
}

// sample brings the buckets up to date (between the attempts' starts and
// ends, which integrate the demand) and syncs the journal.
func (l *ledger) sample() {
	l.tick(l.clock.Now())
	if j := l.journal; j != nil {
		j.Sync()
	}
}

// sampleAndSave brings the buckets up to date and saves them, then lets
// the journal go of what the save includes.
func (l *ledger) sampleAndSave(ctx context.Context) {
	at := l.clock.Now()
	l.tick(at)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	covered, ok := l.save(sctx, l.savedAt, at)
	cancel()
	if ok {
		// a failed save is tried again from the same time
		l.savedAt = at
	}
	if j := l.journal; j != nil && ok {
		j.SavedLedger(covered)
		j.Compact()
	}
}

// tick brings the buckets up to t: the time since the last attempt began
// or ended, at the demand then; and journals the demand, when there is a
// journal.
func (l *ledger) tick(t time.Time) {
	j := l.journal
	if j == nil {
		l.mu.Lock()
		l.advanceLocked(t)
		l.mu.Unlock()
		return
	}
	j.Lock()
	l.mu.Lock()
	l.advanceLocked(t)
	l.journalDemandLocked(j)
	l.mu.Unlock()
	j.Unlock()
}

// add records a finished request's tokens and cloud cost.
func (l *ledger) add(t time.Time, c journal.Charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bucketLocked(t).addCharge(c)
}

// addRequest is add for a charge given by its parts.
func (l *ledger) addRequest(t time.Time, client string, selfHosted bool, prompt, completion int64, cloudUSD float64) {
	l.add(t, journal.Charge{Client: client, SelfHosted: selfHosted, Prompt: prompt, Completion: completion, CloudUSD: cloudUSD})
}

// addCharge records a request, or a mirror copy, in bucket b.
func (b *ledgerBucketData) addCharge(c journal.Charge) {
	if c.Shadow {
		b.shadow.Requests++
		b.shadow.PromptTokens += c.Prompt
		b.shadow.CompletionTokens += c.Completion
		b.shadow.USD += c.CloudUSD
		return
	}
	if c.Client != "" {
		b.addClient(c.Client, c.SelfHosted, c.Prompt, c.Completion, c.CloudUSD)
	}
	b.promptTokens += c.Prompt
	b.completionTokens += c.Completion
	if c.SelfHosted {
		b.selfTokens += c.Prompt + c.Completion
	}
	b.cloudUSD += c.CloudUSD
}

// addShadow records a mirror copy's tokens and cost: validation, not
// business.
func (l *ledger) addShadow(t time.Time, prompt, completion int64, usd float64) {
	l.add(t, journal.Charge{Shadow: true, Prompt: prompt, Completion: completion, CloudUSD: usd})
}

func (l *ledger) bucketLocked(t time.Time) *ledgerBucketData {
	start := t.Truncate(ledgerBucket)
	if n := len(l.buckets); n > 0 {
		last := &l.buckets[(l.next-1+n)%n]
		if last.start.Equal(start) {
			return last
		}
	}
	if len(l.buckets) < ledgerBuckets {
		l.buckets = append(l.buckets, ledgerBucketData{start: start})
		l.next = len(l.buckets) % ledgerBuckets
		return &l.buckets[len(l.buckets)-1]
	}
	b := &l.buckets[l.next]
	*b = ledgerBucketData{start: start}
	l.next = (l.next + 1) % ledgerBuckets
	return b
}

// ledgerWindow is what the ledger saw in a window.
type ledgerWindow struct {
	samples                        []cost.Sample
	prompt, completion, selfTokens int64
	cloudUSD                       float64
	shadow                         cost.Validation
}

// window returns what the ledger saw since t0.
func (l *ledger) window(from, to time.Time) ledgerWindow {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w ledgerWindow
	for i := range l.buckets {
		b := &l.buckets[i]
		if !b.in(from, to) {
			continue
		}
		if b.dur > 0 {
			secs := b.dur.Seconds()
			// the bucket's average demand, and its peak as an instant
			w.samples = append(w.samples, cost.Sample{Dur: b.dur, Self: b.selfSecs / secs, Cloud: b.cloudGS / secs})
			if b.peak > (b.selfSecs+b.cloudGS)/secs {
				w.samples = append(w.samples, cost.Sample{Self: b.peak})
			}
		}
		w.prompt += b.promptTokens
		w.completion += b.completionTokens
		w.selfTokens += b.selfTokens
		w.cloudUSD += b.cloudUSD
		w.shadow.Requests += b.shadow.Requests
		w.shadow.PromptTokens += b.shadow.PromptTokens
		w.shadow.CompletionTokens += b.shadow.CompletionTokens
		w.shadow.USD += b.shadow.USD
	}
	return w
}

// comparison computes the three-way comparison over [from, to).
func (g *Gateway) comparison(from, to time.Time) cost.Comparison {
	var p cost.Prices
	monthly := 0.0 // all self-hosted GPUs at their own prices
	for _, name := range sortedKeys(g.Groups) {
		if grp := g.Groups[name]; grp.Cost != nil && grp.Kind == KindVLLM {
			p.SelfGPUs += grp.Cost.GPUs
			monthly += grp.Cost.GPUs * grp.Cost.GPUCostPerMonth
		}
	}
	if p.SelfGPUs > 0 {
		p.GPUCostPerMonth = monthly / p.SelfGPUs // the average GPU's
	}
	w := g.ledger.window(from, to)
	// the cloud's price per GPU-equivalent second when it is priced per
	// second; with token prices, all-cloud is every token at those cost.Prices
	// the first priced cloud group by name: the same answer every time
	allCloudTokens := -1.0
	for _, name := range sortedKeys(g.Groups) {
		grp := g.Groups[name]
		cc := grp.Cost
		if cc == nil || grp.Kind != KindOpenAI || p.CloudPerGPUSec > 0 || allCloudTokens >= 0 {
			continue
		}
		if cc.PerSecond > 0 {
			// per request-second; a request in flight is one slot of
			// the self-hosted GPUs, cloudSlotGPUs of a GPU
			if g.cloudSlotGPUs > 0 {
				p.CloudPerGPUSec = cc.PerSecond / g.cloudSlotGPUs
			}
		} else {
			allCloudTokens = cc.requestCost(w.prompt, w.completion, 0, 0)
		}
	}
	c := cost.Compare(w.samples, p, w.cloudUSD)
	if p.CloudPerGPUSec == 0 && allCloudTokens >= 0 {
		c.SetAllCloud(allCloudTokens, p.SelfGPUs)
	}
	if w.shadow.Requests > 0 {
		c.Validation = &w.shadow
	}
	c.Tokens = map[string]int{"prompt": int(w.prompt), "completion": int(w.completion), "self_hosted": int(w.selfTokens)}
	if w.selfTokens > 0 {
		perMillion := c.Hybrid.SelfHostedUSD / float64(w.selfTokens) * 1e6
		c.SelfHostedPerMillionTokens = &perMillion
	}
	return c
}

// selfCostPerToken is the self-hosted fixed cost per token over the last
// five minutes, at the utilization they had; 0 when unknown. It is
// computed at most once a second.
func (g *Gateway) selfCostPerToken() float64 {
	l := g.ledger
	t := l.clock.Now()
	if at := l.perTokenAt.Load(); at != 0 && t.UnixNano()-at < int64(time.Second) {
		return math.Float64frombits(l.perToken.Load())
	}
	v := 0.0
	if c := g.comparison(t.Add(-5*time.Minute), t.Add(ledgerBucket)); c.SelfHostedPerMillionTokens != nil {
		v = *c.SelfHostedPerMillionTokens / 1e6
	}
	l.perToken.Store(math.Float64bits(v))
	l.perTokenAt.Store(t.UnixNano())
	return v
}

// hasSelfCost reports whether a vllm group of the gateway has a cost model.
func (g *Gateway) hasSelfCost() bool {
	for _, grp := range g.Groups {
		if grp.Kind == KindVLLM && grp.Cost != nil && grp.Cost.GPUs > 0 {
			return true
		}
	}
	return false
}
