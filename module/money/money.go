// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package money

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// Money is what a gateway keeps of its books (module/books) and asks of
// them: each answer charged, the three-way comparison over its groups'
// prices, the self-hosted cost per token, the spend cap and budgets
// checked (see spend_cap.go), and the spend book saved while the config
// runs.
type Money struct {
	Groups  map[string]*upstream.Group
	Cap     *CloudSpend // nil: no spend cap
	Ledger  *books.Ledger
	Spend   *books.SpendBook // cloud spend, with clients or a spend cap
	Storage certmagic.Storage
	Logger  *zap.Logger
	// a group has a cost model, or the cloud a spend cap: the books hold
	// money, and each request's charge is journaled
	Priced bool
	// the GPUs a cloud request in flight stands for, and the self-hosted
	// GPUs with a cost model (see ProvisionOccupancy)
	CloudSlotGPUs, SelfGPUs float64
}

// Comparison computes the three-way comparison over [from, to).
func (m *Money) Comparison(from, to time.Time) cost.Comparison {
	var p cost.Prices
	monthly := 0.0 // all self-hosted GPUs at their own prices
	for _, name := range slices.Sorted(maps.Keys(m.Groups)) {
		if grp := m.Groups[name]; grp.Cost != nil && grp.Kind == upstream.KindVLLM {
			p.SelfGPUs += grp.Cost.GPUs
			monthly += grp.Cost.GPUs * grp.Cost.GPUCostPerMonth
		}
	}
	if p.SelfGPUs > 0 {
		p.GPUCostPerMonth = monthly / p.SelfGPUs // the average GPU's
	}
	w := m.Ledger.Window(from, to)
	// the cloud's price per GPU-equivalent second when it is priced per
	// second; with token prices, all-cloud is every token at those cost.Prices
	// the first priced cloud group by name: the same answer every time
	allCloudTokens := -1.0
	for _, name := range slices.Sorted(maps.Keys(m.Groups)) {
		grp := m.Groups[name]
		cc := grp.Cost
		if cc == nil || !grp.Cloud() || p.CloudPerGPUSec > 0 || allCloudTokens >= 0 {
			continue
		}
		if cc.PerSecond > 0 {
			// per request-second; a request in flight is one slot of
			// the self-hosted GPUs, CloudSlotGPUs of a GPU
			if m.CloudSlotGPUs > 0 {
				p.CloudPerGPUSec = cc.PerSecond / m.CloudSlotGPUs
			}
		} else {
			allCloudTokens = cc.RequestCost(upstream.Tokens{Prompt: w.Prompt, Cached: w.Classes.Cached, CacheWrite: w.Classes.CacheWrite, Completion: w.Completion}, 0)
		}
	}
	c := cost.Compare(w.Samples, p, w.CloudUSD)
	if p.CloudPerGPUSec == 0 && allCloudTokens >= 0 {
		c.SetAllCloud(allCloudTokens, p.SelfGPUs)
	}
	if w.Shadow.Requests > 0 {
		c.Validation = &w.Shadow
	}
	c.Tokens = map[string]int{"prompt": int(w.Prompt), "completion": int(w.Completion), "self_hosted": int(w.SelfTokens)}
	for k, n := range map[string]int64{"prompt_cached": w.Classes.Cached, "prompt_cache_write": w.Classes.CacheWrite, "completion_reasoning": w.Classes.Reasoning} {
		if n > 0 {
			c.Tokens[k] = int(n)
		}
	}
	if w.SelfTokens > 0 {
		perMillion := c.Hybrid.SelfHostedUSD / float64(w.SelfTokens) * 1e6
		c.SelfHostedPerMillionTokens = &perMillion
	}
	return c
}

// SelfCostPerToken is the self-hosted fixed cost per token over the last
// five minutes, at the utilization they had; 0 when unknown. It is
// computed at most once a second.
func (m *Money) SelfCostPerToken() float64 {
	return m.Ledger.PerToken(func(t time.Time) float64 {
		if c := m.Comparison(t.Add(-5*time.Minute), t.Add(books.BucketSize)); c.SelfHostedPerMillionTokens != nil {
			return *c.SelfHostedPerMillionTokens / 1e6
		}
		return 0
	})
}

// HasSelfCost reports whether a vllm group of the gateway has a cost model.
func (m *Money) HasSelfCost() bool {
	for _, grp := range m.Groups {
		if grp.Kind == upstream.KindVLLM && grp.Cost != nil && grp.Cost.GPUs > 0 {
			return true
		}
	}
	return false
}

// Charge records a finished request in the ledger and the cloud spend,
// through the journal when the gateway has one and its books hold money
// (see Money.Priced): a request that counted nothing writes nothing,
// and the tokens of a gateway without prices are as durable as the
// ledger's minute saves, at no cost per request.
func (m *Money) Charge(cl *clients.Caller, c journal.Charge, at time.Time) {
	l := m.Ledger
	j := l.Journal()
	spent := c.CloudUSD
	if c.Shadow {
		spent = 0
	}
	if j == nil || !m.Priced && c.CloudUSD <= 0 || c.Prompt == 0 && c.Completion == 0 && c.CloudUSD <= 0 {
		l.Add(at, c)
		m.spent(cl, spent, at)
		return
	}
	j.Lock()
	l.Add(at, c)
	m.spent(cl, spent, at)
	j.AppendChargeLocked(at, c)
	j.Unlock()
}

// KeepSaving writes the gateway's book to storage while the config runs,
// and once more when it stops.
func (m *Money) KeepSaving(ctx caddy.Context) {
	st := ctx.Storage()
	if st == nil {
		return
	}
	// at the end: the next config's gateway, if any, carries on from the
	// same book; Cleanup saves it too, before the process may exit
	loop.Loop{Name: "spend saver", Every: spendSaveInterval, Last: m.SaveSpend, Logger: m.Logger}.Go(ctx, nil, func(ctx context.Context) {
		if err := m.Spend.Save(ctx, st); err != nil {
			m.Logger.Error("saving cloud spend", zap.Error(err))
		}
	})
}

// SaveSpend writes the gateway's stored book to storage, if it changed.
func (m *Money) SaveSpend() {
	if m.Spend == nil || !m.Spend.Stored() || m.Storage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Spend.Save(ctx, m.Storage); err != nil {
		m.Logger.Error("saving cloud spend", zap.Error(err))
	}
}

// spendSaveInterval is how often a changed book is written to storage.
const spendSaveInterval = 5 * time.Second

// ProvisionOccupancy sets each group's share of the GPUs per request in
// flight: for a vllm group with a cost model, its GPUs divided by its
// sequence slots; for an openai group, the same share of the self-hosted
// GPUs (a cloud request in flight is counted as one slot of them). Without
// self-hosted GPUs in the cost model there is no comparison to make, and
// nothing is counted.
func (m *Money) ProvisionOccupancy() {
	var gpus, slots float64
	for _, name := range slices.Sorted(maps.Keys(m.Groups)) {
		grp := m.Groups[name]
		if vg := grp.VLLM; vg != nil && grp.Cost != nil && grp.Cost.GPUs > 0 && len(vg.Endpoints) > 0 {
			n := 0.0
			for _, ep := range vg.Endpoints {
				n += float64(vg.SeqSlots(ep))
			}
			grp.Run.Occupancy = grp.Cost.GPUs / n
			gpus += grp.Cost.GPUs
			slots += n
		}
	}
	if slots == 0 {
		return
	}
	m.CloudSlotGPUs, m.SelfGPUs = gpus/slots, gpus
	for _, grp := range m.Groups {
		if grp.Cloud() {
			grp.Run.Occupancy = m.CloudSlotGPUs
		}
	}
}
