// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
)

// fakeClock is a clock of the test's own, at a fixed time.
func fakeClock(t *testing.T) *clock.Manual {
	t.Helper()
	return clock.NewManual(time.Unix(1_800_000_000, 0))
}

// The live ledger keeps one-minute buckets; a window sums those it covers.
func TestLedgerWindow(t *testing.T) {
	clk := fakeClock(t)
	l := Open(Config{Clock: clk})
	start := clk.Now().Truncate(BucketSize)
	// three minutes: 0.5 GPUs self-hosted, 1 GPU in the cloud in the last
	l.Occupy(start, 0.5, 0)
	l.Occupy(start.Add(2*time.Minute), 0, 1)
	l.Occupy(start.Add(3*time.Minute), 0, 0)
	l.Add(start.Add(150*time.Second), journal.Charge{Client: "team-b", Prompt: 100, Completion: 50, CloudUSD: 0.25})
	l.Add(start.Add(10*time.Second), journal.Charge{Client: "team-a", SelfHosted: true, Prompt: 1000, Completion: 500})
	l.Add(start.Add(80*time.Second), journal.Charge{Client: "team-a", Prompt: 10, Completion: 5, CloudUSD: 0.5})
	l.Add(start.Add(30*time.Second), journal.Charge{SelfHosted: true, Prompt: 1, Completion: 1}) // no clients

	end := start.Add(3 * time.Minute)
	w := l.Window(start, end)
	c := cost.Compare(w.Samples, cost.Prices{SelfGPUs: 1, GPUCostPerMonth: 2592, CloudPerGPUSec: 0.01}, w.CloudUSD)
	if c.WindowSeconds != 180 || math.Abs(c.DemandGPUSecs-150) > 1e-9 || c.PeakDemandGPUs != 1.5 {
		t.Errorf("window %v s, demand %v GPU-s, peak %v", c.WindowSeconds, c.DemandGPUSecs, c.PeakDemandGPUs)
	}
	if u := *c.Hybrid.Utilization; math.Abs(u-0.5) > 1e-9 {
		t.Errorf("hybrid utilization %v, want 0.5", u)
	}
	if c.Hybrid.CloudUSD != 0.75 || math.Abs(c.Hybrid.SelfHostedUSD-0.18) > 1e-9 {
		t.Errorf("hybrid spend: cloud %v (recorded 0.75), self-hosted %v (180s of $2592/month = 0.18)", c.Hybrid.CloudUSD, c.Hybrid.SelfHostedUSD)
	}
	if w.Prompt != 1111 || w.Completion != 556 || w.SelfTokens != 1502 {
		t.Errorf("tokens %d %d self %d", w.Prompt, w.Completion, w.SelfTokens)
	}
	uses := l.Clients(start, end)
	if len(uses) != 2 || uses[0].Client != "team-a" || uses[0].PromptTokens != 1010 || uses[0].SelfHostedTokens != 1500 ||
		uses[0].CloudUSD != 0.5 || uses[1].Client != "team-b" || uses[1].CloudUSD != 0.25 {
		t.Errorf("per client: %+v", uses)
	}
	// the last minute only
	w = l.Window(start.Add(2*time.Minute), end)
	if c := cost.Compare(w.Samples, cost.Prices{SelfGPUs: 1}, -1); c.WindowSeconds != 60 || math.Abs(c.DemandGPUSecs-90) > 1e-9 {
		t.Errorf("last minute: %v s, %v GPU-s", c.WindowSeconds, c.DemandGPUSecs)
	}
	if uses := l.Clients(start.Add(2*time.Minute), end); len(uses) != 1 || uses[0].Client != "team-b" {
		t.Errorf("last minute per client: %+v", uses)
	}
}

// Every request counts, however short: twenty 100 ms requests a second
// apart, each a slot of a 4-slot GPU, make 0.5 GPU-seconds, exactly (a
// sampler looking once a second saw none of them).
func TestLedgerCountsShortRequests(t *testing.T) {
	l := Open(Config{Clock: fakeClock(t)})
	start := time.Unix(1_800_000_000, 0)
	for i := range 20 {
		at := start.Add(time.Duration(i) * time.Second)
		l.Occupy(at, 0.25, 0)
		l.Occupy(at.Add(100*time.Millisecond), -0.25, 0)
	}
	l.Occupy(start.Add(20*time.Second), 0, 0)
	c := cost.Compare(l.Window(start, start.Add(time.Hour)).Samples, cost.Prices{SelfGPUs: 1}, -1)
	if math.Abs(c.DemandGPUSecs-0.5) > 1e-9 || c.WindowSeconds != 20 || c.PeakDemandGPUs != 0.25 {
		t.Errorf("demand %v GPU-s over %v s, peak %v; want 0.5 over 20, peak 0.25", c.DemandGPUSecs, c.WindowSeconds, c.PeakDemandGPUs)
	}
}

// Self-hosted requests beyond the GPUs wait in vLLM's queues: neither
// busy GPU time nor demand (the wait is latency; the work is counted when
// they run), though they count for the peak. Six requests of 10 s on the
// four slots of a GPU: four run at once, two wait 10 s and then run, 15
// GPU-seconds of work over 20 s.
func TestLedgerQueuedIsNotDemand(t *testing.T) {
	l := Open(Config{SelfGPUs: 1, Clock: fakeClock(t)})
	start := time.Unix(1_800_000_000, 0).Truncate(BucketSize)
	l.Occupy(start, 1.5, 0)
	l.Occupy(start.Add(10*time.Second), -1, 0) // four done, the two waiting run
	l.Occupy(start.Add(20*time.Second), -0.5, 0)
	c := cost.Compare(l.Window(start, start.Add(time.Hour)).Samples, cost.Prices{SelfGPUs: 1}, -1)
	if u := *c.Hybrid.Utilization; math.Abs(u-0.75) > 1e-9 || math.Abs(c.DemandGPUSecs-15) > 1e-9 || c.PeakDemandGPUs != 1.5 {
		t.Errorf("utilization %v (want 0.75), demand %v GPU-s (want 15), peak %v (want 1.5)", u, c.DemandGPUSecs, c.PeakDemandGPUs)
	}
}

// The ledger persists through Caddy's storage: a new ledger (a restart)
// reads back the days before, their token classes too; a day that is not a ledger is set aside,
// never deleted, and the ledger goes on without it.
func TestLedgerPersists(t *testing.T) {
	clk := fakeClock(t)
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	store := newStore(storage, "gw/one", "instance", zap.NewNop())
	start := clk.Now().Truncate(BucketSize)
	l := &Ledger{store: store, clock: clk}
	l.Occupy(start.Add(-25*time.Hour), 0.5, 0) // yesterday, into today
	l.Add(start.Add(-25*time.Hour), journal.Charge{Client: "team-a", SelfHosted: true, Prompt: 100, Completion: 10})
	l.Occupy(start.Add(-24*time.Hour), -0.5, 0)
	l.Occupy(start, 0, 1)
	l.Add(start.Add(10*time.Second), journal.Charge{Client: "team-b", Prompt: 7, Completion: 3, Cached: 4, CacheWrite: 2, Reasoning: 1, CloudUSD: 0.5})
	l.Occupy(start.Add(time.Minute), 0, -1)
	l.Add(start.Add(20*time.Second), journal.Charge{Shadow: true, Prompt: 5, Completion: 5, CloudUSD: 0.1})
	ctx := context.Background()
	l.Save(ctx, start.Add(-25*time.Hour), start.Add(time.Minute))

	back := &Ledger{store: store, clock: clk}
	back.load(ctx, start.Add(time.Minute))
	for _, w := range []struct{ from, to time.Time }{{start.Add(-26 * time.Hour), start.Add(2 * time.Minute)}, {start, start.Add(time.Minute)}} {
		want, got := l.Window(w.from, w.to), back.Window(w.from, w.to)
		cw, cg := cost.Compare(want.Samples, cost.Prices{SelfGPUs: 1}, -1), cost.Compare(got.Samples, cost.Prices{SelfGPUs: 1}, -1)
		if cw.DemandGPUSecs != cg.DemandGPUSecs || cw.WindowSeconds != cg.WindowSeconds || want.Prompt != got.Prompt ||
			want.CloudUSD != got.CloudUSD || want.Shadow != got.Shadow || want.Classes != got.Classes {
			t.Errorf("window %v: read back %+v / %+v, saved %+v / %+v", w.from, cg, got, cw, want)
		}
	}
	if c := back.Window(start, start.Add(time.Minute)).Classes; c != (TokenClasses{Cached: 4, CacheWrite: 2, Reasoning: 1}) {
		t.Errorf("the token classes read back: %+v", c)
	}
	if uses := back.Clients(start.Add(-26*time.Hour), start.Add(time.Minute)); len(uses) != 2 || uses[0].PromptTokens != 100 || uses[1].CloudUSD != 0.5 {
		t.Errorf("clients read back: %+v", uses)
	}

	// today's day broken: set aside, yesterday still read
	key := store.key(start)
	if err := storage.Store(ctx, key, []byte("{not a ledger")); err != nil {
		t.Fatal(err)
	}
	broken := &Ledger{store: store, clock: clk}
	broken.load(ctx, start.Add(time.Minute))
	if storage.Exists(ctx, key) {
		t.Error("the broken day is still under its key")
	}
	keys, _ := storage.List(ctx, store.prefix, false)
	aside := slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, ".corrupt-") })
	if !aside {
		t.Errorf("the broken day was not set aside: %v", keys)
	}
	if w := broken.Window(start.Add(-26*time.Hour), start); w.Prompt != 100 {
		t.Errorf("yesterday was not read: %d prompt tokens", w.Prompt)
	}
}
