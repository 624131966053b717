// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package cost

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// The seed's worked example: a 30-day month, 0.4 GPUs of demand 70% of
// the time and 2.5 GPUs 30% of the time; one self-hosted GPU; cloud at
// $0.000975 per GPU-second.
func TestSeedExample(t *testing.T) {
	month := time.Duration(SecondsPerMonth) * time.Second
	trough := time.Duration(0.7 * float64(month))
	peak := month - trough
	// the hybrid with one GPU: it carries everything up to 1 GPU
	samples := []Sample{
		{Dur: trough, Self: 0.4, Cloud: 0},
		{Dur: peak, Self: 1, Cloud: 1.5},
	}
	c := Compare(samples, Prices{SelfGPUs: 1, GPUCostPerMonth: 1000, CloudPerGPUSec: 0.000975}, -1)

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
	check("break-even with all-self-hosted", *c.HybridBeatsSelfHostedAbove, "568.62", "%.2f")
	check("break-even with all-cloud", *c.HybridBeatsCloudBelow, "1465.78", "%.2f")
	// a GPU-second self-hosted costs 1000/2,592,000 = 0.000386: it pays
	// for itself above 39.6% of the cloud's 0.000975
	check("break-even utilization", *c.BreakEvenUtilization*100, "39.6", "%.1f")
	for _, tc := range []struct {
		gpuCost               float64
		beatsSelf, beatsCloud bool
	}{{500, false, true}, {600, true, true}, {1400, true, true}, {1500, true, false}} {
		c := Compare(samples, Prices{SelfGPUs: 1, GPUCostPerMonth: tc.gpuCost, CloudPerGPUSec: 0.000975}, -1)
		if got := c.Hybrid.TotalUSD < c.AllSelfHosted.TotalUSD; got != tc.beatsSelf {
			t.Errorf("C=%v: hybrid beats all-self-hosted %v, want %v", tc.gpuCost, got, tc.beatsSelf)
		}
		if got := c.Hybrid.TotalUSD < c.AllCloud.TotalUSD; got != tc.beatsCloud {
			t.Errorf("C=%v: hybrid beats all-cloud %v, want %v", tc.gpuCost, got, tc.beatsCloud)
		}
	}
}
