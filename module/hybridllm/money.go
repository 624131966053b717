// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
)

// money is what a gateway keeps of its books (module/books) and asks of
// them: each answer charged, the three-way comparison over its groups'
// prices, the self-hosted cost per token, the spend cap and budgets
// checked (see spend_cap.go), and the spend book saved while the config
// runs.
type money struct {
	groups  map[string]*Group
	cap     *CloudSpend // nil: no spend cap
	ledger  *books.Ledger
	spend   *books.SpendBook // cloud spend, with clients or a spend cap
	storage certmagic.Storage
	logger  *zap.Logger
	// a group has a cost model, or the cloud a spend cap: the books hold
	// money, and each request's charge is journaled
	priced bool
	// the GPUs a cloud request in flight stands for, and the self-hosted
	// GPUs with a cost model (see provisionOccupancy)
	cloudSlotGPUs, selfGPUs float64
}

// comparison computes the three-way comparison over [from, to).
func (m *money) comparison(from, to time.Time) cost.Comparison {
	var p cost.Prices
	monthly := 0.0 // all self-hosted GPUs at their own prices
	for _, name := range sortedKeys(m.groups) {
		if grp := m.groups[name]; grp.Cost != nil && grp.Kind == KindVLLM {
			p.SelfGPUs += grp.Cost.GPUs
			monthly += grp.Cost.GPUs * grp.Cost.GPUCostPerMonth
		}
	}
	if p.SelfGPUs > 0 {
		p.GPUCostPerMonth = monthly / p.SelfGPUs // the average GPU's
	}
	w := m.ledger.Window(from, to)
	// the cloud's price per GPU-equivalent second when it is priced per
	// second; with token prices, all-cloud is every token at those cost.Prices
	// the first priced cloud group by name: the same answer every time
	allCloudTokens := -1.0
	for _, name := range sortedKeys(m.groups) {
		grp := m.groups[name]
		cc := grp.Cost
		if cc == nil || grp.Kind != KindOpenAI || p.CloudPerGPUSec > 0 || allCloudTokens >= 0 {
			continue
		}
		if cc.PerSecond > 0 {
			// per request-second; a request in flight is one slot of
			// the self-hosted GPUs, cloudSlotGPUs of a GPU
			if m.cloudSlotGPUs > 0 {
				p.CloudPerGPUSec = cc.PerSecond / m.cloudSlotGPUs
			}
		} else {
			allCloudTokens = cc.RequestCost(w.Prompt, w.Completion, 0, 0)
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
	if w.SelfTokens > 0 {
		perMillion := c.Hybrid.SelfHostedUSD / float64(w.SelfTokens) * 1e6
		c.SelfHostedPerMillionTokens = &perMillion
	}
	return c
}

// selfCostPerToken is the self-hosted fixed cost per token over the last
// five minutes, at the utilization they had; 0 when unknown. It is
// computed at most once a second.
func (m *money) selfCostPerToken() float64 {
	return m.ledger.PerToken(func(t time.Time) float64 {
		if c := m.comparison(t.Add(-5*time.Minute), t.Add(books.BucketSize)); c.SelfHostedPerMillionTokens != nil {
			return *c.SelfHostedPerMillionTokens / 1e6
		}
		return 0
	})
}

// hasSelfCost reports whether a vllm group of the gateway has a cost model.
func (m *money) hasSelfCost() bool {
	for _, grp := range m.groups {
		if grp.Kind == KindVLLM && grp.Cost != nil && grp.Cost.GPUs > 0 {
			return true
		}
	}
	return false
}

// charge records a finished request in the ledger and the cloud spend,
// through the journal when the gateway has one and its books hold money
// (see money.priced): a request that counted nothing writes nothing,
// and the tokens of a gateway without prices are as durable as the
// ledger's minute saves, at no cost per request.
func (m *money) charge(cl *clients.Caller, c journal.Charge, at time.Time) {
	l := m.ledger
	j := l.Journal()
	spent := c.CloudUSD
	if c.Shadow {
		spent = 0
	}
	if j == nil || !m.priced && c.CloudUSD <= 0 || c.Prompt == 0 && c.Completion == 0 && c.CloudUSD <= 0 {
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

// keepSaving writes the gateway's book to storage while the config runs,
// and once more when it stops.
func (m *money) keepSaving(ctx caddy.Context) {
	st := ctx.Storage()
	if st == nil {
		return
	}
	// at the end: the next config's gateway, if any, carries on from the
	// same book; Cleanup saves it too, before the process may exit
	loop.Loop{Name: "spend saver", Every: spendSaveInterval, Last: m.saveSpend, Logger: m.logger}.Go(ctx, nil, func(ctx context.Context) {
		if err := m.spend.Save(ctx, st); err != nil {
			m.logger.Error("saving cloud spend", zap.Error(err))
		}
	})
}

// saveSpend writes the gateway's stored book to storage, if it changed.
func (m *money) saveSpend() {
	if m.spend == nil || !m.spend.Stored() || m.storage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.spend.Save(ctx, m.storage); err != nil {
		m.logger.Error("saving cloud spend", zap.Error(err))
	}
}

// spendSaveInterval is how often a changed book is written to storage.
const spendSaveInterval = 5 * time.Second
