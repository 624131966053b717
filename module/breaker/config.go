// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package breaker

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Config is a circuit breaker: allowed_fails failures within the window
// open it for the cooldown; after the cooldown one request is let through
// (half-open); its success closes the breaker, its failure opens it again
// for another full cooldown from that moment.
type Config struct {
	// Failures within the window that open the breaker. Default: 3.
	AllowedFails int `json:"allowed_fails,omitempty"`

	// The window failures are counted in. Default: 60s.
	Window caddy.Duration `json:"window,omitempty"`

	// How long an open breaker stays open. Default: 30s.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`

	// How long the model behind the group takes to load after a
	// restart. Only used to warn: a cooldown shorter than the load time
	// lets traffic back before the model is ready, and the breaker
	// oscillates.
	LoadTime caddy.Duration `json:"load_time,omitempty"`

	// Whether an endpoint breaker that opened on a connection failure
	// (refused, reset, dial error) gets its half-open trial as soon as
	// the endpoint's health probe has passed `rise` times in a row since,
	// rather than after the cooldown: a restarted vLLM is back as soon as
	// it answers. An endpoint that failed with an answer (5xx) waits out
	// the cooldown. Applies to the endpoints of vllm groups. Default: on.
	UnejectOnProbe *bool `json:"uneject_on_probe,omitempty"`
}

const (
	defaultAllowedFails = 3
	defaultWindow       = 60 * time.Second
	defaultCooldown     = 30 * time.Second
)

// ProbesEndCooldown reports whether health probes may end an endpoint's
// cooldown (uneject_on_probe).
func (c *Config) ProbesEndCooldown() bool {
	return c.UnejectOnProbe == nil || *c.UnejectOnProbe
}

// Validate refuses negative values.
func (c *Config) Validate() error {
	if c.AllowedFails < 0 || c.Window < 0 || c.Cooldown < 0 || c.LoadTime < 0 {
		return fmt.Errorf("breaker values must not be negative")
	}
	return nil
}

// Params returns the allowed failures, the window and the cooldown, with
// their defaults filled in.
func (c *Config) Params() (allowed int, window, cooldown time.Duration) {
	allowed, window, cooldown = c.AllowedFails, time.Duration(c.Window), time.Duration(c.Cooldown)
	if allowed == 0 {
		allowed = defaultAllowedFails
	}
	if window == 0 {
		window = defaultWindow
	}
	if cooldown == 0 {
		cooldown = defaultCooldown
	}
	return allowed, window, cooldown
}
