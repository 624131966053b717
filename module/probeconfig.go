// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// ProbeConfig sets how the endpoints of a vLLM group are probed. One
// prober runs per endpoint address per process, shared by every config
// and group that uses the address; when several ask for different
// intervals, the shortest wins.
type ProbeConfig struct {
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
	// down, so that one slow /health under load does not flap it.
	// Default: 2.
	Fall int `json:"fall,omitempty"`
}

const defaultStaleAfter = 2 * time.Second

// provision checks the config (nil means defaults) and returns the prober
// settings, the staleness limit and whether unknown metrics are fine.
func (pc *ProbeConfig) provision() (probeSettings, time.Duration, bool, error) {
	c := ProbeConfig{}
	if pc != nil {
		c = *pc
	}
	or := func(d caddy.Duration, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return time.Duration(d)
	}
	s := probeSettings{
		healthInterval:  or(c.HealthInterval, defaultHealthInterval),
		metricsInterval: or(c.MetricsInterval, defaultMetricsInterval),
		modelsInterval:  or(c.ModelsInterval, defaultModelsInterval),
		timeout:         or(c.Timeout, defaultProbeTimeout),
		ttftWindow:      or(c.TTFTWindow, defaultTTFTWindow),
		rise:            c.Rise,
		fall:            c.Fall,
	}
	if s.rise < 0 || s.fall < 0 {
		return s, 0, false, fmt.Errorf("probe rise and fall must not be negative")
	}
	if s.rise == 0 {
		s.rise = defaultRise
	}
	if s.fall == 0 {
		s.fall = defaultFall
	}
	stale := or(c.StaleAfter, defaultStaleAfter)
	for name, d := range map[string]time.Duration{
		"health_interval": s.healthInterval, "metrics_interval": s.metricsInterval,
		"models_interval": s.modelsInterval, "timeout": s.timeout, "ttft_window": s.ttftWindow, "stale_after": stale,
	} {
		if d <= 0 {
			return s, 0, false, fmt.Errorf("probe %s must be positive", name)
		}
	}
	if stale <= s.metricsInterval {
		return s, 0, false, fmt.Errorf("probe stale_after (%s) must exceed metrics_interval (%s)", stale, s.metricsInterval)
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

// unmarshalProbe parses a probe block. Syntax:
//
//	probe {
//		health_interval  <duration>
//		metrics_interval <duration>
//		models_interval  <duration>
//		timeout          <duration>
//		stale_after      <duration>
//		unknown_metrics  saturated|ok
//		ttft_window      <duration>
//		rise             <n>
//		fall             <n>
//	}
func unmarshalProbe(d *caddyfile.Dispenser) (*ProbeConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	pc := new(ProbeConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *caddy.Duration
		switch d.Val() {
		case "health_interval":
			dst = &pc.HealthInterval
		case "metrics_interval":
			dst = &pc.MetricsInterval
		case "models_interval":
			dst = &pc.ModelsInterval
		case "timeout":
			dst = &pc.Timeout
		case "stale_after":
			dst = &pc.StaleAfter
		case "ttft_window":
			dst = &pc.TTFTWindow
		case "rise", "fall":
			n := map[string]*int{"rise": &pc.Rise, "fall": &pc.Fall}[d.Val()]
			if *n != 0 {
				return nil, d.Errf("%s already specified", d.Val())
			}
			v, err := parsePositiveInt(d)
			if err != nil {
				return nil, err
			}
			*n = v
			continue
		case "unknown_metrics":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			switch d.Val() {
			case "saturated", "ok":
				pc.UnknownMetrics = d.Val()
			default:
				return nil, d.Errf("unknown_metrics must be 'saturated' or 'ok', got '%s'", d.Val())
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			continue
		default:
			return nil, d.Errf("unrecognized probe option '%s'", d.Val())
		}
		if *dst != 0 {
			return nil, d.Errf("%s already specified", d.Val())
		}
		dur, err := parseDuration(d)
		if err != nil {
			return nil, err
		}
		*dst = dur
	}
	return pc, nil
}

// parsePositiveInt reads exactly one integer argument > 0.
func parsePositiveInt(d *caddyfile.Dispenser) (int, error) {
	return parseIntArg(d, 1, "a positive integer")
}

// parseNonNegativeInt reads exactly one integer argument >= 0.
func parseNonNegativeInt(d *caddyfile.Dispenser) (int, error) {
	return parseIntArg(d, 0, "a non-negative integer")
}

// parseIntArg reads exactly one integer argument of at least least.
func parseIntArg(d *caddyfile.Dispenser, least int, want string) (int, error) {
	name := d.Val()
	if !d.NextArg() {
		return 0, d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < least {
		return 0, d.Errf("invalid %s '%s': want %s", name, d.Val(), want)
	}
	if d.NextArg() {
		return 0, d.ArgErr()
	}
	return n, nil
}
