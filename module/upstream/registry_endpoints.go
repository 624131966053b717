// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// AddedEndpoints are the endpoints a registry adds to a vLLM group, beside
// the config's. They are not in the proxy's static pool: the selection
// offers them after the pool's, so that a group the registry adds nothing
// to pays nothing more per request. They are probed like the config's
// (the group's probe, transport and api_key) and have the group's
// max_num_seqs; Caddy's own health checks (health_uri, max_fails) cover
// only the config's.
type AddedEndpoints struct {
	Endpoints []*Endpoint // sorted by address
	Upstreams []*reverseproxy.Upstream
}

// ApplyEndpoints makes a registry group's endpoint list the one in force:
// an address the config lacks is added (its prober starts now); one the
// registry no longer lists leaves the selection, requests in flight on it
// finish, and its prober stops. A weight, or a drain (weight 0 drains
// too), applies to the config's endpoints as to the added ones; without
// one an endpoint has its config's weight and is not drained.
func (g *VLLMGroup) ApplyEndpoints(list []registry.Endpoint, logger *zap.Logger) {
	g.adds.mu.Lock()
	defer g.adds.mu.Unlock()
	if g.adds.off {
		return
	}
	listed := make(map[string]registry.Endpoint, len(list))
	for _, e := range list {
		listed[e.Address] = e
	}
	prev := g.Added.Load()
	kept := map[string]*Endpoint{}
	if prev != nil {
		for _, ep := range prev.Endpoints {
			kept[ep.Dial] = ep
		}
	}
	changed := false
	for addr := range listed {
		if g.Endpoints[addr] != nil || kept[addr] != nil {
			continue
		}
		if !probeable(addr) {
			continue
		}
		ep, err := g.adds.spawn(addr)
		if err != nil {
			logger.Warn("registry: the endpoint cannot be probed; not added", zap.String("group", g.Name), zap.String("endpoint", addr), zap.Error(err))
			continue
		}
		ep.Added = true
		setListed(ep, listed[addr]) // before it can be selected
		if g.adds.running {
			ep.Prober.Begin()
		}
		kept[addr] = ep
		changed = true
		logger.Info("registry: endpoint added", zap.String("group", g.Name), zap.String("endpoint", addr))
	}
	var removed []*Endpoint
	for addr, ep := range kept {
		if _, ok := listed[addr]; !ok {
			delete(kept, addr)
			removed = append(removed, ep)
			changed = true
			logger.Info("registry: endpoint removed; requests in flight on it finish", zap.String("group", g.Name), zap.String("endpoint", addr))
		}
	}
	// the drains and weights first, so that whoever sees the new list
	// sees them too
	for _, ep := range g.Endpoints {
		setListed(ep, listed[ep.Dial])
	}
	for _, ep := range kept {
		setListed(ep, listed[ep.Dial])
	}
	if changed {
		next := &AddedEndpoints{}
		for _, addr := range slices.Sorted(maps.Keys(kept)) {
			next.Endpoints = append(next.Endpoints, kept[addr])
			next.Upstreams = append(next.Upstreams, &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: addr})
		}
		if len(next.Endpoints) == 0 {
			next = nil
		}
		g.Added.Store(next)
	}
	for _, ep := range removed {
		g.adds.unspawn(ep) // out of the selection first
	}
}

// setListed gives an endpoint its registry drain and weight (the zero
// Endpoint: neither).
func setListed(ep *Endpoint, e registry.Endpoint) {
	ep.Drained.Store(e.Drained || (e.Weight != nil && *e.Weight == 0))
	var bits uint64
	if e.Weight != nil && *e.Weight > 0 {
		bits = math.Float64bits(*e.Weight)
	}
	ep.regWeight.Store(bits)
}

// releaseAdded stops the added endpoints' probers when the group goes.
func (g *VLLMGroup) releaseAdded() {
	g.adds.mu.Lock()
	defer g.adds.mu.Unlock()
	g.adds.off = true
	if a := g.Added.Swap(nil); a != nil {
		for _, ep := range a.Endpoints {
			g.adds.unspawn(ep)
		}
	}
}

// All yields the group's endpoints: the config's, then the registry's.
func (g *VLLMGroup) All() iter.Seq[*Endpoint] {
	return func(yield func(*Endpoint) bool) {
		for _, ep := range g.Endpoints {
			if !yield(ep) {
				return
			}
		}
		if a := g.Added.Load(); a != nil {
			for _, ep := range a.Endpoints {
				if !yield(ep) {
					return
				}
			}
		}
	}
}

// Lookup returns the group's endpoint of a dial address, added or not.
func (g *VLLMGroup) Lookup(dial string) *Endpoint {
	if ep := g.Endpoints[dial]; ep != nil {
		return ep
	}
	if a := g.Added.Load(); a != nil {
		for _, ep := range a.Endpoints {
			if ep.Dial == dial {
				return ep
			}
		}
	}
	return nil
}
