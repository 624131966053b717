// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

// The live ledger keeps one-minute buckets; a window sums those it covers.
func TestLedgerWindow(t *testing.T) {
	clk := fakeClock(t)
	l := &ledger{clock: clk}
	start := clk.Now().Truncate(ledgerBucket)
	// three minutes: 0.5 GPUs self-hosted, 1 GPU in the cloud in the last
	l.occupy(start, 0.5, 0)
	l.occupy(start.Add(2*time.Minute), 0, 1)
	l.occupy(start.Add(3*time.Minute), 0, 0)
	l.addRequest(start.Add(150*time.Second), "team-b", false, 100, 50, 0.25)
	l.addRequest(start.Add(10*time.Second), "team-a", true, 1000, 500, 0)
	l.addRequest(start.Add(80*time.Second), "team-a", false, 10, 5, 0.5)
	l.addRequest(start.Add(30*time.Second), "", true, 1, 1, 0) // no clients

	end := start.Add(3 * time.Minute)
	w := l.window(start, end)
	c := cost.Compare(w.samples, cost.Prices{SelfGPUs: 1, GPUCostPerMonth: 2592, CloudPerGPUSec: 0.01}, w.cloudUSD)
	if c.WindowSeconds != 180 || math.Abs(c.DemandGPUSecs-150) > 1e-9 || c.PeakDemandGPUs != 1.5 {
		t.Errorf("window %v s, demand %v GPU-s, peak %v", c.WindowSeconds, c.DemandGPUSecs, c.PeakDemandGPUs)
	}
	if u := *c.Hybrid.Utilization; math.Abs(u-0.5) > 1e-9 {
		t.Errorf("hybrid utilization %v, want 0.5", u)
	}
	if c.Hybrid.CloudUSD != 0.75 || math.Abs(c.Hybrid.SelfHostedUSD-0.18) > 1e-9 {
		t.Errorf("hybrid spend: cloud %v (recorded 0.75), self-hosted %v (180s of $2592/month = 0.18)", c.Hybrid.CloudUSD, c.Hybrid.SelfHostedUSD)
	}
	if w.prompt != 1111 || w.completion != 556 || w.selfTokens != 1502 {
		t.Errorf("tokens %d %d self %d", w.prompt, w.completion, w.selfTokens)
	}
	uses := l.clientWindow(start, end)
	if len(uses) != 2 || uses[0].Client != "team-a" || uses[0].PromptTokens != 1010 || uses[0].SelfHostedTokens != 1500 ||
		uses[0].CloudUSD != 0.5 || uses[1].Client != "team-b" || uses[1].CloudUSD != 0.25 {
		t.Errorf("per client: %+v", uses)
	}
	// the last minute only
	w = l.window(start.Add(2*time.Minute), end)
	if c := cost.Compare(w.samples, cost.Prices{SelfGPUs: 1}, -1); c.WindowSeconds != 60 || math.Abs(c.DemandGPUSecs-90) > 1e-9 {
		t.Errorf("last minute: %v s, %v GPU-s", c.WindowSeconds, c.DemandGPUSecs)
	}
	if uses := l.clientWindow(start.Add(2*time.Minute), end); len(uses) != 1 || uses[0].Client != "team-b" {
		t.Errorf("last minute per client: %+v", uses)
	}
}

// Every request counts, however short: twenty 100 ms requests a second
// apart, each a slot of a 4-slot GPU, make 0.5 GPU-seconds, exactly (a
// sampler looking once a second saw none of them).
func TestLedgerCountsShortRequests(t *testing.T) {
	fakeClock(t)
	l := &ledger{clock: fakeClock(t)}
	start := time.Unix(1_800_000_000, 0)
	for i := range 20 {
		at := start.Add(time.Duration(i) * time.Second)
		l.occupy(at, 0.25, 0)
		l.occupy(at.Add(100*time.Millisecond), -0.25, 0)
	}
	l.occupy(start.Add(20*time.Second), 0, 0)
	c := cost.Compare(l.window(start, start.Add(time.Hour)).samples, cost.Prices{SelfGPUs: 1}, -1)
	if math.Abs(c.DemandGPUSecs-0.5) > 1e-9 || c.WindowSeconds != 20 || c.PeakDemandGPUs != 0.25 {
		t.Errorf("demand %v GPU-s over %v s, peak %v; want 0.5 over 20, peak 0.25", c.DemandGPUSecs, c.WindowSeconds, c.PeakDemandGPUs)
	}
}

// Cloud prices per second are per request-second: the all-cloud scenario
// charges a request in flight (one slot of the self-hosted GPUs) its
// price, not a whole GPU's; several vllm groups cost their own GPUs at
// their own prices.
func TestComparisonUnits(t *testing.T) {
	clk := fakeClock(t)
	l := &ledger{clock: clk}
	g := &Gateway{ledger: l, clock: clk, Groups: map[string]*Group{
		"big":   {Kind: KindVLLM, Cost: &CostConfig{GPUs: 2, GPUCostPerMonth: 3000}},
		"small": {Kind: KindVLLM, Cost: &CostConfig{GPUs: 1, GPUCostPerMonth: 600}},
		"cloud": {Kind: KindOpenAI, Cost: &CostConfig{PerSecond: 0.001}},
	}, cloudSlotGPUs: 0.25}
	start := clk.Now().Truncate(ledgerBucket)
	// one cloud request in flight for 100 s: 25 GPU-seconds
	l.occupy(start, 0, 0.25)
	clk.Set(start.Add(100 * time.Second))
	l.occupy(clk.Now(), 0, -0.25)
	c := g.comparison(start, start.Add(time.Hour))
	if math.Abs(c.AllCloud.CloudUSD-0.1) > 1e-9 {
		t.Errorf("all cloud %v USD, want 100 request-seconds at 0.001 = 0.1", c.AllCloud.CloudUSD)
	}
	month := (2*3000.0 + 600) * c.WindowSeconds / cost.SecondsPerMonth
	if math.Abs(c.Hybrid.SelfHostedUSD-month) > 1e-9 {
		t.Errorf("self-hosted %v USD, want %v (each group's GPUs at their price)", c.Hybrid.SelfHostedUSD, month)
	}
}

// Self-hosted requests beyond the GPUs wait in vLLM's queues: neither
// busy GPU time nor demand (the wait is latency; the work is counted when
// they run), though they count for the peak. Six requests of 10 s on the
// four slots of a GPU: four run at once, two wait 10 s and then run, 15
// GPU-seconds of work over 20 s.
func TestLedgerQueuedIsNotDemand(t *testing.T) {
	fakeClock(t)
	l := &ledger{selfGPUs: 1, clock: fakeClock(t)}
	start := time.Unix(1_800_000_000, 0).Truncate(ledgerBucket)
	l.occupy(start, 1.5, 0)
	l.occupy(start.Add(10*time.Second), -1, 0) // four done, the two waiting run
	l.occupy(start.Add(20*time.Second), -0.5, 0)
	c := cost.Compare(l.window(start, start.Add(time.Hour)).samples, cost.Prices{SelfGPUs: 1}, -1)
	if u := *c.Hybrid.Utilization; math.Abs(u-0.75) > 1e-9 || math.Abs(c.DemandGPUSecs-15) > 1e-9 || c.PeakDemandGPUs != 1.5 {
		t.Errorf("utilization %v (want 0.75), demand %v GPU-s (want 15), peak %v (want 1.5)", u, c.DemandGPUSecs, c.PeakDemandGPUs)
	}
}

// The ledger answers windows up to what it holds, 31 days, by duration or
// by times, always including the unfinished minute it ends in.
func TestLedgerWindowQuery(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 30, 20, 0, time.UTC)
	for _, tc := range []struct {
		query    string
		from, to string // RFC 3339; empty: an error
	}{
		{"", "2026-12-01T09:30:20Z", "2026-12-01T10:31:00Z"},
		{"window=30d", "2026-11-01T10:30:20Z", "2026-12-01T10:31:00Z"},
		{"window=7d", "2026-11-24T10:30:20Z", "2026-12-01T10:31:00Z"},
		{"window=32d", "", ""},
		{"window=-1h", "", ""},
		{"from=2026-11-30T00:00:00Z&to=2026-12-01T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"from=2026-11-30T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T10:31:00Z"},
		{"from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "", ""},
		{"from=yesterday", "", ""},
		{"window=1h&from=2026-11-30T00:00:00Z", "", ""},
	} {
		q, _ := url.ParseQuery(tc.query)
		from, to, err := ledgerWindowOf(q, at)
		if tc.from == "" {
			if err == nil {
				t.Errorf("%q: no error", tc.query)
			}
			continue
		}
		if err != nil || from.Format(time.RFC3339) != tc.from || to.Format(time.RFC3339) != tc.to {
			t.Errorf("%q: %v to %v (%v), want %s to %s", tc.query, from, to, err, tc.from, tc.to)
		}
	}
}

// The ledger persists through Caddy's storage: a new ledger (a restart)
// reads back the days before; a day that is not a ledger is set aside,
// never deleted, and the ledger goes on without it.
func TestLedgerPersists(t *testing.T) {
	clk := fakeClock(t)
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	store := newLedgerStore(storage, "gw/one", "instance", zap.NewNop())
	start := clk.Now().Truncate(ledgerBucket)
	l := &ledger{store: store, clock: clk}
	l.occupy(start.Add(-25*time.Hour), 0.5, 0) // yesterday, into today
	l.addRequest(start.Add(-25*time.Hour), "team-a", true, 100, 10, 0)
	l.occupy(start.Add(-24*time.Hour), -0.5, 0)
	l.occupy(start, 0, 1)
	l.addRequest(start.Add(10*time.Second), "team-b", false, 7, 3, 0.5)
	l.occupy(start.Add(time.Minute), 0, -1)
	l.addShadow(start.Add(20*time.Second), 5, 5, 0.1)
	ctx := context.Background()
	l.save(ctx, start.Add(-25*time.Hour), start.Add(time.Minute))

	back := &ledger{store: store, clock: clk}
	back.load(ctx, start.Add(time.Minute))
	for _, w := range []struct{ from, to time.Time }{{start.Add(-26 * time.Hour), start.Add(2 * time.Minute)}, {start, start.Add(time.Minute)}} {
		want, got := l.window(w.from, w.to), back.window(w.from, w.to)
		cw, cg := cost.Compare(want.samples, cost.Prices{SelfGPUs: 1}, -1), cost.Compare(got.samples, cost.Prices{SelfGPUs: 1}, -1)
		if cw.DemandGPUSecs != cg.DemandGPUSecs || cw.WindowSeconds != cg.WindowSeconds || want.prompt != got.prompt ||
			want.cloudUSD != got.cloudUSD || want.shadow != got.shadow {
			t.Errorf("window %v: read back %+v / %+v, saved %+v / %+v", w.from, cg, got, cw, want)
		}
	}
	if uses := back.clientWindow(start.Add(-26*time.Hour), start.Add(time.Minute)); len(uses) != 2 || uses[0].PromptTokens != 100 || uses[1].CloudUSD != 0.5 {
		t.Errorf("clients read back: %+v", uses)
	}

	// today's day broken: set aside, yesterday still read
	key := store.key(start)
	if err := storage.Store(ctx, key, []byte("{not a ledger")); err != nil {
		t.Fatal(err)
	}
	broken := &ledger{store: store, clock: clk}
	broken.load(ctx, start.Add(time.Minute))
	if storage.Exists(ctx, key) {
		t.Error("the broken day is still under its key")
	}
	keys, _ := storage.List(ctx, store.prefix, false)
	aside := slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, ".corrupt-") })
	if !aside {
		t.Errorf("the broken day was not set aside: %v", keys)
	}
	if w := broken.window(start.Add(-26*time.Hour), start); w.prompt != 100 {
		t.Errorf("yesterday was not read: %d prompt tokens", w.prompt)
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
	self := &Group{Kind: KindVLLM, Cost: &CostConfig{GPUs: 1, GPUCostPerMonth: 1000},
		vllm: &vllmGroup{endpoints: map[string]*endpoint{"10.0.0.5:8000": {maxNumSeqs: 10}}}}
	cloud := &Group{Kind: KindOpenAI, Cost: &CostConfig{PerSecond: 0.0000975}}
	g := &Gateway{Name: "seed-month", Groups: map[string]*Group{"self": self, "cloud": cloud}, logger: zap.NewNop(), clock: clk}
	g.provisionOccupancy()
	g.ledger = &ledger{selfGPUs: g.selfGPUs, clock: clk}
	targets := map[*Group]*Target{self: {Group: "self", Model: "qwen", group: self}, cloud: {Group: "cloud", Model: "gpt", group: cloud}}

	type attempt struct {
		rt  *route
		occ occupancyObserver
	}
	var running []attempt
	start := func(grp *Group, n int) {
		for range n {
			rt := &route{g: g}
			occ, _ := occupancyOf(g.ledger, targets[grp])
			occ.attemptBegan(context.Background(), nil)
			rt.answered, rt.answerBegan = targets[grp], clk.Now()
			rt.usage.Prompt, rt.usage.Completion = 200, 25
			running = append(running, attempt{rt, occ})
		}
	}
	endAll := func() {
		for _, a := range running {
			a.occ.attemptEnded(nil)
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
			g.ledger.tick(clk.Now())
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
	c := g.comparison(month, month.Add(cost.SecondsPerMonth*time.Second+ledgerBucket))
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
	l := &ledger{clock: clk}
	g := &Gateway{ledger: l, clock: clk, Groups: map[string]*Group{
		"self":  {Kind: KindVLLM, Cost: &CostConfig{GPUs: 1, GPUCostPerMonth: 1000}},
		"cloud": {Kind: KindOpenAI, Cost: &CostConfig{InputPerMillion: 1, OutputPerMillion: 2}},
	}, cloudSlotGPUs: 0.25}
	start := clk.Now().Truncate(ledgerBucket)
	l.occupy(start, 0.25, 0)
	l.addRequest(start.Add(time.Second), "", true, 2_000_000, 1_000_000, 0) // 2M prompt and 1M completion tokens: $4
	l.addRequest(start.Add(2*time.Second), "", false, 1_000_000, 0, 1)      // $1 spent
	clk.Set(start.Add(25920 * time.Second))                                 // a hundredth of a month
	l.occupy(clk.Now(), -0.25, 0)
	c := g.comparison(start, start.Add(24*time.Hour))
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
