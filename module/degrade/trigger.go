// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package degrade holds the pure logic of the degradation chain: the
// triggers that send new requests from an upper tier to a smaller model
// before they fail (a latency regression confirmed by a queue, a KV cache
// filling up), and the sliding share of degraded answers that caps it.
// Time is an argument everywhere; nothing here reads a clock.
//
// It is a leaf: it imports nothing of the product.
package degrade

import (
	"fmt"
	"math"
	"time"
)

// Reasons a trigger gives.
const (
	ReasonSLO = "slo_breach"  // p99 over factor × SLO, with a queue
	ReasonKV  = "kv_pressure" // KV cache over its level and rising
)

// Config is when an upper tier's new requests degrade.
type Config struct {
	// The tier's latency objective: p99 time to first token. 0 turns
	// the latency trigger off.
	SLO time.Duration
	// The latency trigger fires over Factor × SLO (default 1.5), when
	// the queue is deeper than QueueDepth (default 10) too.
	Factor     float64
	QueueDepth float64
	// The KV-cache trigger fires over KVLevel (0..1, default 0.85; 0
	// off) while usage rises over KVWindow (default 5s).
	KVLevel  float64
	KVWindow time.Duration
	// The shortest time a state is held (default 10s).
	Dwell time.Duration
}

// Defaults.
const (
	DefaultFactor     = 1.5
	DefaultQueueDepth = 10
	DefaultKVLevel    = 0.85
	DefaultKVWindow   = 5 * time.Second
	DefaultDwell      = 10 * time.Second
)

// WithDefaults fills the zero values; a negative KVLevel turns the KV
// trigger off.
func (c Config) WithDefaults() Config {
	if c.Factor <= 0 {
		c.Factor = DefaultFactor
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = DefaultQueueDepth
	}
	switch {
	case c.KVLevel == 0:
		c.KVLevel = DefaultKVLevel
	case c.KVLevel < 0:
		c.KVLevel = 0
	}
	if c.KVWindow <= 0 {
		c.KVWindow = DefaultKVWindow
	}
	if c.Dwell <= 0 {
		c.Dwell = DefaultDwell
	}
	return c
}

// Signals are an upper tier's numbers at one moment; NaN is unknown.
type Signals struct {
	P99   float64 // seconds, time to first token
	Queue float64 // requests waiting
	KV    float64 // KV-cache usage, 0..1
}

// Decision is a trigger's state and what caused it.
type Decision struct {
	Active bool
	Reason string // ReasonSLO or ReasonKV, while active
	Since  time.Time
	// the numbers behind it, as the seed's DegradeDecision.Metadata
	Metadata map[string]float64
	// why, in words: "p99=3.2s > 1.5×2s, queue=14 > 10"
	Why string
}

// Trigger decides, from an upper tier's signals over time, whether its new
// requests degrade. It is not safe for concurrent use.
type Trigger struct {
	cfg     Config
	state   Decision
	samples []sample // KV usage over the last KVWindow
}

type sample struct {
	t  time.Time
	kv float64
}

// NewTrigger returns a trigger with cfg (defaults filled).
func NewTrigger(cfg Config) *Trigger {
	return &Trigger{cfg: cfg.WithDefaults()}
}

// Config returns the trigger's config, defaults filled.
func (tr *Trigger) Config() Config { return tr.cfg }

// Decision returns the current state.
func (tr *Trigger) Decision() Decision { return tr.state }

// Observe takes the signals at t and returns the state, and whether it
// changed. On: p99 over Factor × SLO with a queue over QueueDepth, or KV
// usage over KVLevel and rising over KVWindow. Off, once the dwell is
// over: p99 at most the SLO or the queue at most half the depth, and the
// KV usage under its level by 5 points or no longer rising. Unknown
// signals hold the state.
func (tr *Trigger) Observe(t time.Time, s Signals) (Decision, bool) {
	c := tr.cfg
	slope, slopeOK := tr.slope(t, s.KV)
	latencyOn := c.SLO > 0 && !math.IsNaN(s.P99) && !math.IsNaN(s.Queue) &&
		s.P99 > c.Factor*c.SLO.Seconds() && s.Queue > c.QueueDepth
	kvOn := c.KVLevel > 0 && !math.IsNaN(s.KV) && slopeOK && s.KV > c.KVLevel && slope > 0
	st := &tr.state
	if !st.Since.IsZero() && t.Sub(st.Since) < c.Dwell {
		return *st, false // each state is held at least the dwell
	}
	if !st.Active {
		switch {
		case latencyOn:
			*st = Decision{Active: true, Reason: ReasonSLO, Since: t,
				Metadata: map[string]float64{"p99_latency_ms": s.P99 * 1000, "queue_depth": s.Queue},
				Why:      fmt.Sprintf("p99=%s > %g×%s, queue=%g > %g", secs(s.P99), c.Factor, c.SLO, s.Queue, c.QueueDepth)}
		case kvOn:
			*st = Decision{Active: true, Reason: ReasonKV, Since: t,
				Metadata: map[string]float64{"kv_cache_usage": s.KV, "kv_slope_per_s": slope},
				Why:      fmt.Sprintf("kv_cache_usage=%.1f%% > %.1f%%, rising %.2f points/s", s.KV*100, c.KVLevel*100, slope*100)}
		default:
			return *st, false
		}
		return *st, true
	}
	var clear bool
	switch st.Reason {
	case ReasonSLO:
		clear = (!math.IsNaN(s.P99) && s.P99 <= c.SLO.Seconds()) || (!math.IsNaN(s.Queue) && s.Queue <= c.QueueDepth/2)
		if clear {
			st.Why = fmt.Sprintf("p99=%s, queue=%g", secs(s.P99), s.Queue)
		}
	case ReasonKV:
		clear = !math.IsNaN(s.KV) && (s.KV < c.KVLevel-0.05 || (slopeOK && slope <= 0))
		if clear {
			st.Why = fmt.Sprintf("kv_cache_usage=%.1f%%, slope %.2f points/s", s.KV*100, slope*100)
		}
	}
	if !clear {
		return *st, false
	}
	*st = Decision{Since: t, Why: st.Why}
	return *st, true
}

// slope records kv at t and returns the least-squares slope of the usage
// over the window, per second; ok once the samples span half the window.
func (tr *Trigger) slope(t time.Time, kv float64) (float64, bool) {
	if !math.IsNaN(kv) {
		tr.samples = append(tr.samples, sample{t, kv})
	}
	cut := 0
	for cut < len(tr.samples) && t.Sub(tr.samples[cut].t) > tr.cfg.KVWindow {
		cut++
	}
	tr.samples = append(tr.samples[:0], tr.samples[cut:]...)
	n := len(tr.samples)
	if n < 2 || tr.samples[n-1].t.Sub(tr.samples[0].t) < tr.cfg.KVWindow/2 {
		return 0, false
	}
	t0 := tr.samples[0].t
	var sx, sy, sxx, sxy float64
	for _, s := range tr.samples {
		x := s.t.Sub(t0).Seconds()
		sx += x
		sy += s.kv
		sxx += x * x
		sxy += x * s.kv
	}
	fn := float64(n)
	den := fn*sxx - sx*sx
	if den == 0 {
		return 0, false
	}
	return (fn*sxy - sx*sy) / den, true
}

func secs(v float64) string {
	if math.IsNaN(v) {
		return "none"
	}
	return (time.Duration(v * float64(time.Second))).Round(time.Millisecond).String()
}
