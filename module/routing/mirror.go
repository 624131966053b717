// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Mirror copies a sampled share of an alias's requests to a target of
// its own, once the request's own targets are chosen, and throws the
// answer away after reading it to the end to meter it. The client's
// answer never waits for a mirror copy, and nothing a mirror does (slow,
// failing, hanging) reaches the request: each copy runs on its own
// context with its own timeout. Copies are metered as shadow traffic:
// `billing="shadow"` on the token and cost metrics, a validation line
// in the ledger, no client's budget and no cloud spend cap.
type Mirror struct {
	// The mirror's target; its timeout bounds each copy (default: 60s)
	// and its model name is swapped in as for any target. Set, weight,
	// health and fallback_on do not apply.
	Target

	// The share of requests copied, from 0 (exclusive) to 1.
	Ratio float64 `json:"ratio,omitempty"`

	// The most copies in flight at once; a copy beyond it is dropped
	// (and counted). Default: 32.
	MaxInFlight int `json:"max_in_flight,omitempty"`

	Inflight atomic.Int64  `json:"-"`
	Series   *mirrorSeries `json:"-"`
}

// DefaultMirrorTimeout bounds a mirror copy whose target sets no timeout.
const DefaultMirrorTimeout = 60 * time.Second

// defaultMirrorInFlight is a mirror's in-flight bound when none is set.
const defaultMirrorInFlight = 32

var (
	MirrorRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "mirror_requests_total",
		Help: "Mirror copies by alias, mirror target (group, model) and outcome: ok, rejected (4xx), failed (5xx), timeout, unreachable, interrupted.",
	}, []string{"gateway", "alias", "group", "model", "outcome"})

	MirrorDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "mirror_dropped_total",
		Help: "Mirror copies not sent: the mirror had max_in_flight copies in flight, or (a vllm group) no endpoint had room to spare.",
	}, []string{"gateway", "alias", "group", "model"})

	MirrorDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "mirror_duration_seconds",
		Help:    "Time a mirror copy took to its answer's end, by alias and mirror target.",
		Buckets: requestDurationBuckets,
	}, []string{"gateway", "alias", "group", "model"})

	MirrorTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "mirror_ttft_seconds",
		Help:    "Time a mirror copy took to its answer's first body byte, by alias and mirror target.",
		Buckets: ttftBuckets,
	}, []string{"gateway", "alias", "group", "model"})
)

// mirrorSeries are a mirror's series, resolved at provisioning.
type mirrorSeries struct {
	Dropped            prometheus.Counter
	Duration, TTFT     prometheus.Observer
	Prompt, Completion prometheus.Counter
	Cost               prometheus.Counter
}

// mirrors checks the alias's mirrors.
func (s *AliasSetup) mirrors(al *Alias) error {
	for i, m := range al.Mirrors {
		if m == nil {
			return fmt.Errorf("mirror %d: empty", i)
		}
		if m.Set != "" || m.Weight != nil || m.Health != nil || m.FallbackOn != nil || m.Tier != nil || m.SLO != 0 {
			return fmt.Errorf("mirror %d (group %q): set, weight, health, fallback_on, tier and slo do not apply to a mirror", i, m.Group)
		}
		if !(m.Ratio > 0 && m.Ratio <= 1) || math.IsNaN(m.Ratio) {
			return fmt.Errorf("mirror %d (group %q): ratio must be a share over 0 and at most 1 (100%%)", i, m.Group)
		}
		if m.MaxInFlight < 0 {
			return fmt.Errorf("mirror %d (group %q): max_in_flight must not be negative", i, m.Group)
		}
		if m.Timeout == nil {
			d := caddy.Duration(DefaultMirrorTimeout)
			m.Timeout = &d
		}
		if err := s.target(al, &m.Target); err != nil {
			return fmt.Errorf("mirror %d (group %q): %v", i, m.Group, err)
		}
		if m.Run.Timeout == 0 {
			return fmt.Errorf("mirror %d (group %q): a mirror needs a timeout", i, m.Group)
		}
		if m.MaxInFlight == 0 {
			m.MaxInFlight = defaultMirrorInFlight
		}
		l := []string{s.Gateway, al.Name, m.Group, m.Model}
		m.Series = &mirrorSeries{
			Dropped:    MirrorDropped.WithLabelValues(l...),
			Duration:   MirrorDuration.WithLabelValues(l...),
			TTFT:       MirrorTTFT.WithLabelValues(l...),
			Prompt:     TokensTotal.WithLabelValues(s.Gateway, al.Name, m.Group, "prompt", "", BillingShadow),
			Completion: TokensTotal.WithLabelValues(s.Gateway, al.Name, m.Group, "completion", "", BillingShadow),
			Cost:       CostTotal.WithLabelValues(s.Gateway, m.Group, "", BillingShadow),
		}
	}
	return nil
}
