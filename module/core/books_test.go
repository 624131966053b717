// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// Cloud prices per second are per request-second: the all-cloud scenario
// charges a request in flight (one slot of the self-hosted GPUs) its
// price, not a whole GPU's; several vllm groups cost their own GPUs at
// their own prices.
func TestComparisonUnits(t *testing.T) {
	clk := fakeClock(t)
	l := books.Open(books.Config{Clock: clk})
	g := newFront(Front{Clock: clk})
	g.Money = &money.Money{Ledger: l, Groups: map[string]*upstream.Group{
		"big":   {Kind: upstream.KindVLLM, Cost: &upstream.CostConfig{GPUs: 2, GPUCostPerMonth: 3000}},
		"small": {Kind: upstream.KindVLLM, Cost: &upstream.CostConfig{GPUs: 1, GPUCostPerMonth: 600}},
		"cloud": {Kind: upstream.KindOpenAI, Cost: &upstream.CostConfig{PerSecond: 0.001}},
	}, CloudSlotGPUs: 0.25}
	start := clk.Now().Truncate(books.BucketSize)
	// one cloud request in flight for 100 s: 25 GPU-seconds
	l.Occupy(start, 0, 0.25)
	clk.Set(start.Add(100 * time.Second))
	l.Occupy(clk.Now(), 0, -0.25)
	c := g.Money.Comparison(start, start.Add(time.Hour))
	if math.Abs(c.AllCloud.CloudUSD-0.1) > 1e-9 {
		t.Errorf("all cloud %v USD, want 100 request-seconds at 0.001 = 0.1", c.AllCloud.CloudUSD)
	}
	month := (2*3000.0 + 600) * c.WindowSeconds / cost.SecondsPerMonth
	if math.Abs(c.Hybrid.SelfHostedUSD-month) > 1e-9 {
		t.Errorf("self-hosted %v USD, want %v (each group's GPUs at their price)", c.Hybrid.SelfHostedUSD, month)
	}
}

// The seed's month, through the path a request takes: every attempt
// occupies its slot from start to end (occupyGPUs and release, as try
// does), each answered request is priced as it ends (cost, per
// request-second), the sampler ticks every minute, and the ledger's
// window gives the seed's table to the cent. One GPU of ten slots; each
// day 0.4 GPUs of demand (4 requests) but from 14:24 to 21:36, 2.5 GPUs:
// ten requests self-hosted, fifteen in the cloud at 0.000975 per
// GPU-second, a tenth of that per request-second.
func TestLedgerSeedMonthThroughTheRequestPath(t *testing.T) {
	clk := fakeClock(t)
	self := &upstream.Group{Kind: upstream.KindVLLM, Cost: &upstream.CostConfig{GPUs: 1, GPUCostPerMonth: 1000},
		VLLM: &upstream.VLLMGroup{Endpoints: map[string]*upstream.Endpoint{"10.0.0.5:8000": {MaxNumSeqs: 10}}}}
	cloud := &upstream.Group{Kind: upstream.KindOpenAI, Cost: &upstream.CostConfig{PerSecond: 0.0000975}}
	g := newFront(Front{Name: "seed-month", Logger: zap.NewNop(), Clock: clk})
	g.Money = &money.Money{Groups: map[string]*upstream.Group{"self": self, "cloud": cloud}, Logger: g.Logger}
	g.Money.ProvisionOccupancy()
	g.Money.Ledger = books.Open(books.Config{SelfGPUs: g.Money.SelfGPUs, Clock: clk})
	targets := map[*upstream.Group]*routing.Target{self: {Group: "self", Model: "qwen", Upstream: self}, cloud: {Group: "cloud", Model: "gpt", Upstream: cloud}}

	type attempt struct {
		rt  *Route
		occ routing.OccupancyObserver
	}
	var running []attempt
	start := func(grp *upstream.Group, n int) {
		for range n {
			rt := &Route{f: g}
			occ, _ := routing.OccupancyOf(g.Money.Ledger, targets[grp])
			occ.AttemptBegan(context.Background(), nil)
			rt.x.ans.target, rt.x.ans.began = targets[grp], clk.Now()
			rt.x.usage.Prompt, rt.x.usage.Completion = 200, 25
			running = append(running, attempt{rt, occ})
		}
	}
	endAll := func() {
		for _, a := range running {
			a.occ.AttemptEnded(nil)
			a.rt.cost(clk.Now())
		}
		running = running[:0]
	}
	until := func(at time.Time) {
		for clk.Now().Before(at) {
			clk.Set(clk.Now().Add(time.Minute))
			if clk.Now().After(at) {
				clk.Set(at)
			}
			g.Money.Ledger.Tick(clk.Now())
		}
	}
	month := clk.Now().Truncate(24 * time.Hour)
	clk.Set(month)
	for day := range 30 {
		d := month.Add(time.Duration(day) * 24 * time.Hour)
		start(self, 4)
		until(d.Add(14*time.Hour + 24*time.Minute))
		endAll()
		start(self, 10)
		start(cloud, 15)
		until(d.Add(21*time.Hour + 36*time.Minute))
		endAll()
		start(self, 4)
		until(d.Add(24 * time.Hour))
		endAll()
	}

	// the last answers end as the month does: their minute is in the window
	c := g.Money.Comparison(month, month.Add(cost.SecondsPerMonth*time.Second+books.BucketSize))
	if c.WindowSeconds != cost.SecondsPerMonth || math.Abs(c.DemandGPUSecs-2_669_760) > 1e-3 {
		t.Errorf("%v s of %v GPU-seconds, want 2,592,000 of 2,669,760", c.WindowSeconds, c.DemandGPUSecs)
	}
	for _, f := range []struct {
		what, got, want string
	}{
		{"all-cloud", fmt.Sprintf("%.2f", c.AllCloud.TotalUSD), "2603.02"},
		{"all-self-hosted GPUs", fmt.Sprintf("%g", c.AllSelfHosted.GPUs), "3"},
		{"all-self-hosted utilization", fmt.Sprintf("%.1f", *c.AllSelfHosted.Utilization*100), "34.3"},
		{"all-self-hosted (3C)", fmt.Sprintf("%.2f", c.AllSelfHosted.TotalUSD), "3000.00"},
		{"hybrid utilization", fmt.Sprintf("%.1f", *c.Hybrid.Utilization*100), "58.0"},
		{"hybrid cloud spend, priced request by request", fmt.Sprintf("%.2f", c.Hybrid.CloudUSD), "1137.24"},
		{"hybrid (C + cloud)", fmt.Sprintf("%.2f", c.Hybrid.TotalUSD), "2137.24"},
		{"hybrid beats all-self-hosted above", fmt.Sprintf("%.2f", *c.HybridBeatsSelfHostedAbove), "568.62"},
		{"hybrid beats all-cloud below", fmt.Sprintf("%.2f", *c.HybridBeatsCloudBelow), "1465.78"},
	} {
		if f.got != f.want {
			t.Errorf("%s: %s, want %s", f.what, f.got, f.want)
		}
	}
	// 30 days of 4 + 10 + 4 self-hosted requests and 15 cloud ones
	if c.Tokens["self_hosted"] != 30*18*225 || c.Tokens["prompt"] != 30*33*200 {
		t.Errorf("tokens %v", c.Tokens)
	}
}

// A cloud priced per token has its all-cloud scenario priced per token,
// and the break-even below which the hybrid beats it comes with it.
func TestComparisonTokenPricedCloudBreakEven(t *testing.T) {
	clk := fakeClock(t)
	l := books.Open(books.Config{Clock: clk})
	g := newFront(Front{Clock: clk})
	g.Money = &money.Money{Ledger: l, Groups: map[string]*upstream.Group{
		"self":  {Kind: upstream.KindVLLM, Cost: &upstream.CostConfig{GPUs: 1, GPUCostPerMonth: 1000}},
		"cloud": {Kind: upstream.KindOpenAI, Cost: &upstream.CostConfig{InputPerMillion: 1, OutputPerMillion: 2}},
	}, CloudSlotGPUs: 0.25}
	start := clk.Now().Truncate(books.BucketSize)
	l.Occupy(start, 0.25, 0)
	l.Add(start.Add(time.Second), journal.Charge{SelfHosted: true, Prompt: 2_000_000, Completion: 1_000_000, CloudUSD: 0}) // 2M prompt and 1M completion tokens: $4
	l.Add(start.Add(2*time.Second), journal.Charge{SelfHosted: false, Prompt: 1_000_000, Completion: 0, CloudUSD: 1})      // $1 spent
	clk.Set(start.Add(25920 * time.Second))                                                                                // a hundredth of a month
	l.Occupy(clk.Now(), -0.25, 0)
	c := g.Money.Comparison(start, start.Add(24*time.Hour))
	if math.Abs(c.AllCloud.TotalUSD-5) > 1e-9 {
		t.Errorf("all cloud %v, want every token at the cloud's prices: 5", c.AllCloud.TotalUSD)
	}
	// the hybrid ($10 of GPU for the hundredth, plus $1) beats all-cloud
	// ($5) for GPUs below (5-1)/0.01 = $400 a month
	if c.HybridBeatsCloudBelow == nil || math.Abs(*c.HybridBeatsCloudBelow-400) > 1e-6 {
		t.Errorf("hybrid beats all-cloud below %v, want 400", ptrOr(c.HybridBeatsCloudBelow))
	}
}

func ptrOr(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}
