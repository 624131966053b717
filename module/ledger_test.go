// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"math"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

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
	l.addRequest(start.Add(50*time.Second), "team-b", false, 100, 50, 0.25)
	l.addRequest(start.Add(10*time.Second), "team-a", true, 1000, 500, 0)
	l.addRequest(start.Add(20*time.Second), "team-a", false, 10, 5, 0.5)
	l.addRequest(start.Add(30*time.Second), "", true, 1, 1, 0) // no clients

	w := l.window(start)
	c := cost.Compare(w.samples, cost.Prices{SelfGPUs: 1, GPUCostPerMonth: 2592, CloudPerGPUSec: 0.01}, w.cloudUSD)
	if c.WindowSeconds != 60 || math.Abs(c.DemandGPUSecs-50) > 1e-9 || c.PeakDemandGPUs != 1.5 {
		t.Errorf("window %v s, demand %v GPU-s, peak %v", c.WindowSeconds, c.DemandGPUSecs, c.PeakDemandGPUs)
	}
	if u := *c.Hybrid.Utilization; math.Abs(u-0.5) > 1e-9 {
		t.Errorf("hybrid utilization %v, want 0.5", u)
	}
	if c.Hybrid.CloudUSD != 0.75 || math.Abs(c.Hybrid.SelfHostedUSD-0.06) > 1e-9 {
		t.Errorf("hybrid spend: cloud %v (recorded 0.75), self-hosted %v (60s of $2592/month = 0.06)", c.Hybrid.CloudUSD, c.Hybrid.SelfHostedUSD)
	}
	if w.prompt != 1111 || w.completion != 556 || w.selfTokens != 1502 {
		t.Errorf("tokens %d %d self %d", w.prompt, w.completion, w.selfTokens)
	}
	uses := l.clientWindow(start)
	if len(uses) != 2 || uses[0].Client != "team-a" || uses[0].PromptTokens != 1010 || uses[0].SelfHostedTokens != 1500 ||
		uses[0].CloudUSD != 0.5 || uses[1].Client != "team-b" || uses[1].CloudUSD != 0.25 {
		t.Errorf("per client: %+v", uses)
	}
	// the last 20 seconds only
	w = l.window(start.Add(40 * time.Second))
	if c := cost.Compare(w.samples, cost.Prices{SelfGPUs: 1}, -1); c.WindowSeconds != 20 || math.Abs(c.DemandGPUSecs-30) > 1e-9 {
		t.Errorf("last 20s: %v s, %v GPU-s", c.WindowSeconds, c.DemandGPUSecs)
	}
}
