// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clients

import (
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"github.com/hybridllm/caddy-hybrid-llm/module/ratelimit"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// Usage is what a client has used, kept by gateway and client name for
// the life of the process, so that it lasts across config reloads and a
// client that a keys file drops and adds back finds its minute as it
// left it.
type Usage struct {
	Requests, Tokens ratelimit.Minute
}

var usages = reload.NewPool[*Usage]()

// usageOf returns the usage of a client of a gateway.
func usageOf(gateway, client string) *Usage {
	return usages.Keep(reload.Key(gateway, client), func() *Usage { return new(Usage) })
}

// Limits returns the client's per-minute limits on this gateway. With a
// registry they are its share among the fleet's live gateways, split as
// the red lines are (registry.Share) but never below one, so that the
// fleet together allows the configured limit: exactly, when the limit is
// at least the number of gateways.
func (c *Caller) Limits() (rpm, tpm int) {
	rpm, tpm = c.RPM, c.TPM
	if c.fleet == nil {
		return rpm, tpm
	}
	if sh := c.fleet.Load(); sh != nil && sh.N > 1 {
		rpm, tpm = fleetLimit(rpm, sh), fleetLimit(tpm, sh)
	}
	return rpm, tpm
}

func fleetLimit(limit int, sh *fleet.Share) int {
	if limit <= 0 {
		return limit
	}
	return max(1, registry.Share(limit, sh.Rank, sh.N))
}
