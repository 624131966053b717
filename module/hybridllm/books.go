// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
)

// What the gateway keeps in its books (module/books) and asks of them:
// each answer charged, the three-way comparison, the self-hosted cost per
// token, and the spend book saved while the config runs.

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
	w := g.ledger.Window(from, to)
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
			allCloudTokens = cc.requestCost(w.Prompt, w.Completion, 0, 0)
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
func (g *Gateway) selfCostPerToken() float64 {
	return g.ledger.PerToken(func(t time.Time) float64 {
		if c := g.comparison(t.Add(-5*time.Minute), t.Add(books.BucketSize)); c.SelfHostedPerMillionTokens != nil {
			return *c.SelfHostedPerMillionTokens / 1e6
		}
		return 0
	})
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

// charge records a finished request in the ledger and the cloud spend,
// through the journal when the gateway has one and its books hold money
// (see Gateway.priced): a request that counted nothing writes nothing,
// and the tokens of a gateway without prices are as durable as the
// ledger's minute saves, at no cost per request.
func (g *Gateway) charge(cl *client, c journal.Charge, at time.Time) {
	l := g.ledger
	j := l.Journal()
	spent := c.CloudUSD
	if c.Shadow {
		spent = 0
	}
	if j == nil || !g.priced && c.CloudUSD <= 0 || c.Prompt == 0 && c.Completion == 0 && c.CloudUSD <= 0 {
		l.Add(at, c)
		g.spent(cl, spent, at)
		return
	}
	j.Lock()
	l.Add(at, c)
	g.spent(cl, spent, at)
	j.AppendChargeLocked(at, c)
	j.Unlock()
}

// keepSaving writes the gateway's book to storage while the config runs,
// and once more when it stops.
func (g *Gateway) keepSaving(ctx caddy.Context) {
	st := ctx.Storage()
	if st == nil {
		return
	}
	// at the end: the next config's gateway, if any, carries on from the
	// same book; Cleanup saves it too, before the process may exit
	loop.Loop{Name: "spend saver", Every: spendSaveInterval, Last: g.saveSpend, Logger: g.logger}.Go(ctx, nil, func(ctx context.Context) {
		if err := g.spend.Save(ctx, st); err != nil {
			g.logger.Error("saving cloud spend", zap.Error(err))
		}
	})
}

// saveSpend writes the gateway's stored book to storage, if it changed.
func (g *Gateway) saveSpend() {
	if g.spend == nil || !g.spend.Stored() || g.storage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.spend.Save(ctx, g.storage); err != nil {
		g.logger.Error("saving cloud spend", zap.Error(err))
	}
}

// spendSaveInterval is how often a changed book is written to storage.
const spendSaveInterval = 5 * time.Second
