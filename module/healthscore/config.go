// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package healthscore

import (
	"fmt"
	"math"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Config is health-score scheduling for a member of a weighted
// set: over a sliding window of its requests, an error rate or p99
// latency near a threshold raises an alert (a log line and a metric),
// one over it degrades the member (its weight goes to 0 and its share to
// the healthy members, in proportion to their weights), and failing
// probes (every endpoint of its group down by its health checks) or
// every request failing break it. After a hold its weight ramps back in
// steps. The last member in service is never taken out.
type Config struct {
	// The share of failed requests (5xx, timeouts, connection errors,
	// upstream_auth, model_not_found; not the client's own 4xx or
	// cancellations) above which the member is degraded; 0: not watched.
	// Default: 0.05.
	ErrorRate *float64 `json:"error_rate,omitempty"`

	// The p99 latency (to the first byte for streams, of the whole answer
	// otherwise) above which the member is degraded. Default: none.
	P99Latency caddy.Duration `json:"p99_latency,omitempty"`

	// The share of a threshold at which an alert is raised. Default: 0.8.
	AlertAt float64 `json:"alert_at,omitempty"`

	// The sliding window the numbers are taken over. Default: 10s.
	Window caddy.Duration `json:"window,omitempty"`

	// Requests the window must hold before its numbers count. Default: 20.
	MinRequests int `json:"min_requests,omitempty"`

	// How long a member taken out stays out (a broken one from when its
	// probes pass again) before its weight ramps back; doubled for each
	// relapse in a row, up to 8 times. Default: 10s.
	Hold caddy.Duration `json:"hold,omitempty"`

	// The share of its weight a recovering member gets back per step, and
	// the time between steps. Defaults: 0.25 and 2s.
	RampStep     float64        `json:"ramp_step,omitempty"`
	RampInterval caddy.Duration `json:"ramp_interval,omitempty"`

	// The most members of the set out at once (the largest its members
	// give). Default: all but one.
	MaxDegraded int `json:"max_degraded,omitempty"`
}

// Policy is the config's thresholds and timings, checked, with the
// defaults filled in.
func (hc *Config) Policy() (Policy, error) {
	switch {
	case hc.ErrorRate != nil && (math.IsNaN(*hc.ErrorRate) || *hc.ErrorRate < 0 || *hc.ErrorRate > 1):
		return Policy{}, fmt.Errorf("health: error_rate must be a share from 0 to 1")
	case math.IsNaN(hc.AlertAt) || hc.AlertAt < 0 || hc.AlertAt > 1:
		return Policy{}, fmt.Errorf("health: alert_at must be a share from 0 to 1")
	case math.IsNaN(hc.RampStep) || hc.RampStep < 0 || hc.RampStep > 1:
		return Policy{}, fmt.Errorf("health: ramp_step must be a share from 0 to 1")
	case hc.P99Latency < 0 || hc.Window < 0 || hc.Hold < 0 || hc.RampInterval < 0 || hc.MinRequests < 0 || hc.MaxDegraded < 0:
		return Policy{}, fmt.Errorf("health: values must not be negative")
	}
	er := 0.05
	if hc.ErrorRate != nil {
		er = *hc.ErrorRate
	}
	return Policy{
		ErrorRate: er, P99: time.Duration(hc.P99Latency), AlertAt: hc.AlertAt, MinRequests: hc.MinRequests,
		Hold: time.Duration(hc.Hold), RampStep: hc.RampStep, RampInterval: time.Duration(hc.RampInterval),
	}.WithDefaults(), nil
}

// WindowLength is the sliding window's length: Window, or DefaultWindow.
func (hc *Config) WindowLength() time.Duration {
	if hc.Window > 0 {
		return time.Duration(hc.Window)
	}
	return DefaultWindow
}

// Under returns own with its unset values taken from hc (a copy of hc
// when own is nil).
func (hc *Config) Under(own *Config) *Config {
	out := *hc
	if own == nil {
		return &out
	}
	if own.ErrorRate != nil {
		out.ErrorRate = own.ErrorRate
	}
	for _, f := range []struct{ dst, src *caddy.Duration }{
		{&out.P99Latency, &own.P99Latency}, {&out.Window, &own.Window}, {&out.Hold, &own.Hold},
		{&out.RampInterval, &own.RampInterval},
	} {
		if *f.src != 0 {
			*f.dst = *f.src
		}
	}
	for _, f := range []struct{ dst, src *float64 }{{&out.AlertAt, &own.AlertAt}, {&out.RampStep, &own.RampStep}} {
		if *f.src != 0 {
			*f.dst = *f.src
		}
	}
	for _, f := range []struct{ dst, src *int }{{&out.MinRequests, &own.MinRequests}, {&out.MaxDegraded, &own.MaxDegraded}} {
		if *f.src != 0 {
			*f.dst = *f.src
		}
	}
	return &out
}
