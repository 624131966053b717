// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Config sets how the endpoints of a vLLM group are probed. One
// prober runs per endpoint address per process, shared by every config
// and group that uses the address; when several ask for different
// intervals, the shortest wins.
type Config struct {
	// How often GET /health is asked. 200 is up; anything else, a
	// refused connection (a booting vLLM) or a timeout is down.
	// Default: 2s.
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`

	// How often GET /metrics is scraped for the queue, running count,
	// KV-cache usage and TTFT. Default: 500ms.
	MetricsInterval caddy.Duration `json:"metrics_interval,omitempty"`

	// How often GET /v1/models is checked for the served model names
	// and their max_model_len. Default: 30s.
	ModelsInterval caddy.Duration `json:"models_interval,omitempty"`

	// The timeout of each probe request. Default: 1s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Metrics older than this count as unknown. Must exceed
	// metrics_interval. Default: 2s.
	StaleAfter caddy.Duration `json:"stale_after,omitempty"`

	// What unknown (stale or missing) metrics mean for selection:
	// `saturated` skips the endpoint, `ok` selects it on the gateway's
	// own in-flight count. Default: saturated.
	UnknownMetrics string `json:"unknown_metrics,omitempty"`

	// The window of the TTFT p50/p99, computed from histogram bucket
	// deltas between scrapes. Default: 30s.
	TTFTWindow caddy.Duration `json:"ttft_window,omitempty"`

	// Health probes that must pass in a row to bring a down endpoint
	// back (and, with the breaker's uneject_on_probe, to end a cooldown
	// opened on connection failures). The first probe of an endpoint
	// decides its state at once. Default: 2.
	Rise int `json:"rise,omitempty"`

	// Health probes that must fail in a row to take an up endpoint
	// down, so that one slow /health under load does not flap it. An
	// endpoint taken down gets no new requests, and its answers under way
	// end at once (a stream with the stream_interrupted error event): a
	// frozen vLLM would keep them open and silent. Default: 2.
	Fall int `json:"fall,omitempty"`
}

const defaultStaleAfter = 2 * time.Second

// Provision checks the config (nil means defaults) and returns the prober
// settings, the staleness limit and whether unknown metrics are fine.
func (pc *Config) Provision() (Settings, time.Duration, bool, error) {
	c := Config{}
	if pc != nil {
		c = *pc
	}
	or := func(d caddy.Duration, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return time.Duration(d)
	}
	s := Settings{
		HealthInterval:  or(c.HealthInterval, defaultHealthInterval),
		MetricsInterval: or(c.MetricsInterval, defaultMetricsInterval),
		ModelsInterval:  or(c.ModelsInterval, defaultModelsInterval),
		Timeout:         or(c.Timeout, defaultProbeTimeout),
		TTFTWindow:      or(c.TTFTWindow, defaultTTFTWindow),
		Rise:            c.Rise,
		Fall:            c.Fall,
	}
	if s.Rise < 0 || s.Fall < 0 {
		return s, 0, false, fmt.Errorf("probe rise and fall must not be negative")
	}
	if s.Rise == 0 {
		s.Rise = defaultRise
	}
	if s.Fall == 0 {
		s.Fall = defaultFall
	}
	stale := or(c.StaleAfter, defaultStaleAfter)
	for name, d := range map[string]time.Duration{
		"health_interval": s.HealthInterval, "metrics_interval": s.MetricsInterval,
		"models_interval": s.ModelsInterval, "timeout": s.Timeout, "ttft_window": s.TTFTWindow, "stale_after": stale,
	} {
		if d <= 0 {
			return s, 0, false, fmt.Errorf("probe %s must be positive", name)
		}
	}
	if stale <= s.MetricsInterval {
		return s, 0, false, fmt.Errorf("probe stale_after (%s) must exceed metrics_interval (%s)", stale, s.MetricsInterval)
	}
	unknownOK := false
	switch c.UnknownMetrics {
	case "", "saturated":
	case "ok":
		unknownOK = true
	default:
		return s, 0, false, fmt.Errorf("probe unknown_metrics must be 'saturated' or 'ok', got %q", c.UnknownMetrics)
	}
	return s, stale, unknownOK, nil
}
