// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// The seed's worked example: a 30-day month, 0.4 GPUs of demand 70% of
// the time and 2.5 GPUs 30% of the time; one self-hosted GPU; cloud at
// $0.000975 per GPU-second.
func TestLedgerSeedExample(t *testing.T) {
	month := time.Duration(secondsPerMonth) * time.Second
	trough := time.Duration(0.7 * float64(month))
	peak := month - trough
	// the hybrid with one GPU: it carries everything up to 1 GPU
	samples := []demandSample{
		{dur: trough, self: 0.4, cloud: 0},
		{dur: peak, self: 1, cloud: 1.5},
	}
	c := compare(samples, prices{selfGPUs: 1, gpuCostPerMonth: 1000, cloudPerGPUSec: 0.000975}, -1)

	if got := c.DemandGPUSecs; math.Abs(got-2_669_760) > 1e-3 {
		t.Errorf("demand %v GPU-seconds, want 2,669,760", got)
	}
	check := func(what string, got float64, want string, format string) {
		t.Helper()
		if s := fmt.Sprintf(format, got); s != want {
			t.Errorf("%s: %s, want %s", what, s, want)
		}
	}
	check("all-cloud cost", c.AllCloud.TotalUSD, "2603.02", "%.2f")
	check("all-self-hosted GPUs", c.AllSelfHosted.GPUs, "3", "%.0f")
	check("all-self-hosted utilization", *c.AllSelfHosted.Utilization*100, "34.3", "%.1f")
	check("all-self-hosted cost (3C)", c.AllSelfHosted.TotalUSD, "3000.00", "%.2f")
	check("hybrid utilization", *c.Hybrid.Utilization*100, "58.0", "%.1f")
	check("hybrid cloud spend", c.Hybrid.CloudUSD, "1137.24", "%.2f")
	check("hybrid total (C + cloud)", c.Hybrid.TotalUSD, "2137.24", "%.2f")
	// the seed's break-even points: hybrid beats all-self-hosted above
	// C = 568.62 and all-cloud below C = 1465.78
	for _, tc := range []struct {
		gpuCost               float64
		beatsSelf, beatsCloud bool
	}{{500, false, true}, {600, true, true}, {1400, true, true}, {1500, true, false}} {
		c := compare(samples, prices{selfGPUs: 1, gpuCostPerMonth: tc.gpuCost, cloudPerGPUSec: 0.000975}, -1)
		if got := c.Hybrid.TotalUSD < c.AllSelfHosted.TotalUSD; got != tc.beatsSelf {
			t.Errorf("C=%v: hybrid beats all-self-hosted %v, want %v", tc.gpuCost, got, tc.beatsSelf)
		}
		if got := c.Hybrid.TotalUSD < c.AllCloud.TotalUSD; got != tc.beatsCloud {
			t.Errorf("C=%v: hybrid beats all-cloud %v, want %v", tc.gpuCost, got, tc.beatsCloud)
		}
	}
}

// The live ledger keeps 10-second buckets; a window sums what fell in it.
func TestLedgerWindow(t *testing.T) {
	clock := fakeClock(t)
	l := &ledger{}
	start := clock.Truncate(ledgerBucket)
	for i := range 60 { // a minute: 0.5 GPUs self-hosted, 1 GPU in the cloud for the last 20s
		cloud := 0.0
		if i >= 40 {
			cloud = 1
		}
		l.add(start.Add(time.Duration(i)*time.Second), time.Second, 0.5, cloud, 0, 0, 0)
	}
	l.addRequest(start.Add(50*time.Second), false, 100, 50, 0.25)
	l.addRequest(start.Add(10*time.Second), true, 1000, 500, 0)

	w := l.window(start)
	c := compare(w.samples, prices{selfGPUs: 1, gpuCostPerMonth: 2592, cloudPerGPUSec: 0.01}, w.cloudUSD)
	if c.WindowSeconds != 60 || math.Abs(c.DemandGPUSecs-50) > 1e-9 || c.PeakDemandGPUs != 1.5 {
		t.Errorf("window %v s, demand %v GPU-s, peak %v", c.WindowSeconds, c.DemandGPUSecs, c.PeakDemandGPUs)
	}
	if u := *c.Hybrid.Utilization; math.Abs(u-0.5) > 1e-9 {
		t.Errorf("hybrid utilization %v, want 0.5", u)
	}
	if c.Hybrid.CloudUSD != 0.25 || math.Abs(c.Hybrid.SelfHostedUSD-0.06) > 1e-9 {
		t.Errorf("hybrid spend: cloud %v (recorded 0.25), self-hosted %v (60s of $2592/month = 0.06)", c.Hybrid.CloudUSD, c.Hybrid.SelfHostedUSD)
	}
	if w.prompt != 1100 || w.completion != 550 || w.selfTokens != 1500 {
		t.Errorf("tokens %d %d self %d", w.prompt, w.completion, w.selfTokens)
	}
	// the last 20 seconds only
	w = l.window(start.Add(40 * time.Second))
	if c := compare(w.samples, prices{selfGPUs: 1}, -1); c.WindowSeconds != 20 || math.Abs(c.DemandGPUSecs-30) > 1e-9 {
		t.Errorf("last 20s: %v s, %v GPU-s", c.WindowSeconds, c.DemandGPUSecs)
	}
}
