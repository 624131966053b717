// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package cost is the arithmetic of the cost ledger: the seed's three-way
// comparison of all-cloud, all-self-hosted and hybrid serving of a
// measured demand.
//
// It is a leaf: it imports nothing of the product.
package cost

import (
	"math"
	"time"
)

// SecondsPerMonth is a 30-day month, as in the seed's arithmetic.
const SecondsPerMonth = 30 * 24 * 3600

// Sample is a stretch of time with the demand it saw, in GPU
// equivalents (the self-hosted GPUs the load would occupy), split into
// the share self-hosted carried and the share the cloud carried.
type Sample struct {
	Dur         time.Duration
	Self, Cloud float64 // GPU equivalents
}

// Comparison is the seed's three-way comparison over a window.
type Comparison struct {
	WindowSeconds  float64        `json:"covered_seconds"` // the part of the window the ledger saw
	DemandGPUSecs  float64        `json:"demand_gpu_seconds"`
	PeakDemandGPUs float64        `json:"peak_demand_gpus"`
	AllCloud       Scenario       `json:"all_cloud"`
	AllSelfHosted  Scenario       `json:"all_self_hosted"`
	Hybrid         Scenario       `json:"hybrid"`
	Tokens         map[string]int `json:"tokens,omitempty"`
	// the self-hosted fixed cost per million tokens it served, at the
	// window's utilization; null when it served none
	SelfHostedPerMillionTokens *float64 `json:"self_hosted_usd_per_million_tokens"`
	// mirror copies over the window: validation traffic, in none of the
	// scenarios above; absent when there were none
	Validation *Validation `json:"validation,omitempty"`
	// the utilization above which a self-hosted GPU costs less than the
	// cloud for the same work: its cost per second over the cloud's
	// price per GPU-equivalent second (its per-second price, or what the
	// window's cloud work cost); null when either is unknown
	BreakEvenUtilization *float64 `json:"break_even_utilization"`
	// the seed's break-even GPU prices (USD per GPU-month): above the
	// first the hybrid as run costs less than all-self-hosted, below the
	// second less than all-cloud; null when not defined (no GPUs to save,
	// no self-hosted GPUs)
	HybridBeatsSelfHostedAbove *float64 `json:"hybrid_beats_self_hosted_above_gpu_usd_per_month"`
	HybridBeatsCloudBelow      *float64 `json:"hybrid_beats_cloud_below_gpu_usd_per_month"`
}

// Validation is what mirror copies (shadow traffic) used and cost.
type Validation struct {
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	USD              float64 `json:"usd"`
}

// Scenario is one way of serving the window's demand.
type Scenario struct {
	GPUs float64 `json:"gpus"`
	// busy share of the self-hosted GPUs; null without self-hosted GPUs
	Utilization *float64 `json:"utilization"`
	// the fixed self-hosted cost over the window
	SelfHostedUSD float64 `json:"self_hosted_usd"`
	CloudUSD      float64 `json:"cloud_usd"`
	TotalUSD      float64 `json:"total_usd"`
}

// Prices are what the comparison needs to know of the groups.
type Prices struct {
	SelfGPUs        float64 // self-hosted GPUs as run
	GPUCostPerMonth float64
	CloudPerGPUSec  float64 // USD per GPU-equivalent second in the cloud
}

// Compare computes the three scenarios from demand samples: all-cloud
// (every GPU-second at cloud rates), all-self-hosted (enough GPUs for the
// peak, rounded up), and the hybrid as run (the self-hosted GPUs plus
// what the cloud carried). cloudUSD, when not negative, is the cloud
// spend actually recorded, used for the hybrid instead of the estimate.
func Compare(samples []Sample, p Prices, cloudUSD float64) Comparison {
	var c Comparison
	var selfSecs, cloudSecs float64
	for _, s := range samples {
		secs := s.Dur.Seconds()
		c.WindowSeconds += secs
		selfSecs += s.Self * secs
		cloudSecs += s.Cloud * secs
		c.PeakDemandGPUs = max(c.PeakDemandGPUs, s.Self+s.Cloud)
	}
	c.DemandGPUSecs = selfSecs + cloudSecs
	fixed := func(gpus float64) float64 { return gpus * p.GPUCostPerMonth * c.WindowSeconds / SecondsPerMonth }
	util := func(busy, gpus float64) *float64 {
		if gpus <= 0 || c.WindowSeconds <= 0 {
			return nil
		}
		u := busy / (gpus * c.WindowSeconds)
		return &u
	}

	c.AllCloud.CloudUSD = c.DemandGPUSecs * p.CloudPerGPUSec
	c.AllCloud.TotalUSD = c.AllCloud.CloudUSD

	c.AllSelfHosted.GPUs = max(0, math.Ceil(c.PeakDemandGPUs-1e-9)) // no -0 without demand
	c.AllSelfHosted.Utilization = util(c.DemandGPUSecs, c.AllSelfHosted.GPUs)
	c.AllSelfHosted.SelfHostedUSD = fixed(c.AllSelfHosted.GPUs)
	c.AllSelfHosted.TotalUSD = c.AllSelfHosted.SelfHostedUSD

	c.Hybrid.GPUs = p.SelfGPUs
	c.Hybrid.Utilization = util(selfSecs, p.SelfGPUs)
	c.Hybrid.SelfHostedUSD = fixed(p.SelfGPUs)
	c.Hybrid.CloudUSD = cloudSecs * p.CloudPerGPUSec
	if cloudUSD >= 0 {
		c.Hybrid.CloudUSD = cloudUSD
	}
	c.Hybrid.TotalUSD = c.Hybrid.SelfHostedUSD + c.Hybrid.CloudUSD
	perGPUSec := p.CloudPerGPUSec
	if perGPUSec == 0 && cloudSecs > 0 && c.Hybrid.CloudUSD > 0 {
		perGPUSec = c.Hybrid.CloudUSD / cloudSecs
	}
	if perGPUSec > 0 && p.GPUCostPerMonth > 0 {
		u := p.GPUCostPerMonth / SecondsPerMonth / perGPUSec
		c.BreakEvenUtilization = &u
	}
	// hybrid = S·C·m + cloud, all-self-hosted = N·C·m, all-cloud = A
	if m := c.WindowSeconds / SecondsPerMonth; m > 0 {
		if extra := c.AllSelfHosted.GPUs - p.SelfGPUs; extra > 0 {
			v := c.Hybrid.CloudUSD / (extra * m)
			c.HybridBeatsSelfHostedAbove = &v
		}
	}
	c.beatsCloud(p.SelfGPUs)
	return c
}

// SetAllCloud prices the all-cloud scenario at usd, when the cloud bills
// tokens rather than time: every token of the window at its prices.
func (c *Comparison) SetAllCloud(usd, selfGPUs float64) {
	c.AllCloud.CloudUSD, c.AllCloud.TotalUSD = usd, usd
	c.beatsCloud(selfGPUs)
}

// beatsCloud sets the GPU price below which the hybrid as run costs less
// than all-cloud: hybrid = S·C·m + cloud < all-cloud.
func (c *Comparison) beatsCloud(selfGPUs float64) {
	c.HybridBeatsCloudBelow = nil
	if m := c.WindowSeconds / SecondsPerMonth; m > 0 && selfGPUs > 0 && c.AllCloud.CloudUSD > c.Hybrid.CloudUSD {
		v := (c.AllCloud.CloudUSD - c.Hybrid.CloudUSD) / (selfGPUs * m)
		c.HybridBeatsCloudBelow = &v
	}
}
