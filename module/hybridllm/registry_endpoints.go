// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
)

// addedEndpoints are the endpoints a registry adds to a vLLM group, beside
// the config's. They are not in the proxy's static pool: the selection
// offers them after the pool's, so that a group the registry adds nothing
// to pays nothing more per request. They are probed like the config's
// (the group's probe, transport and api_key) and have the group's
// max_num_seqs; Caddy's own health checks (health_uri, max_fails) cover
// only the config's.
type addedEndpoints struct {
	eps []*endpoint // sorted by address
	ups []*reverseproxy.Upstream
}

// applyEndpoints makes a registry group's endpoint list the one in force:
// an address the config lacks is added (its prober starts now); one the
// registry no longer lists leaves the selection, requests in flight on it
// finish, and its prober stops. A weight, or a drain (weight 0 drains
// too), applies to the config's endpoints as to the added ones; without
// one an endpoint has its config's weight and is not drained.
func (g *vllmGroup) applyEndpoints(list []registry.Endpoint, logger *zap.Logger) {
	g.adds.mu.Lock()
	defer g.adds.mu.Unlock()
	if g.adds.off {
		return
	}
	listed := make(map[string]registry.Endpoint, len(list))
	for _, e := range list {
		listed[e.Address] = e
	}
	prev := g.added.Load()
	kept := map[string]*endpoint{}
	if prev != nil {
		for _, ep := range prev.eps {
			kept[ep.dial] = ep
		}
	}
	changed := false
	for addr := range listed {
		if g.endpoints[addr] != nil || kept[addr] != nil {
			continue
		}
		if !probeable(addr) {
			continue
		}
		ep, err := g.adds.spawn(addr)
		if err != nil {
			logger.Warn("registry: the endpoint cannot be probed; not added", zap.String("group", g.name), zap.String("endpoint", addr), zap.Error(err))
			continue
		}
		ep.added = true
		setListed(ep, listed[addr]) // before it can be selected
		if g.adds.running {
			ep.p.Begin()
		}
		kept[addr] = ep
		changed = true
		logger.Info("registry: endpoint added", zap.String("group", g.name), zap.String("endpoint", addr))
	}
	var removed []*endpoint
	for addr, ep := range kept {
		if _, ok := listed[addr]; !ok {
			delete(kept, addr)
			removed = append(removed, ep)
			changed = true
			logger.Info("registry: endpoint removed; requests in flight on it finish", zap.String("group", g.name), zap.String("endpoint", addr))
		}
	}
	if changed {
		next := &addedEndpoints{}
		for _, addr := range slices.Sorted(maps.Keys(kept)) {
			next.eps = append(next.eps, kept[addr])
			next.ups = append(next.ups, &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: addr})
		}
		if len(next.eps) == 0 {
			next = nil
		}
		g.added.Store(next)
	}
	for _, ep := range removed {
		g.adds.unspawn(ep) // out of the selection first
	}
	for ep := range g.all() {
		e, ok := listed[ep.dial]
		if !ok {
			e = registry.Endpoint{}
		}
		setListed(ep, e)
	}
}

// setListed gives an endpoint its registry drain and weight (the zero
// Endpoint: neither).
func setListed(ep *endpoint, e registry.Endpoint) {
	ep.drained.Store(e.Drained || (e.Weight != nil && *e.Weight == 0))
	var bits uint64
	if e.Weight != nil && *e.Weight > 0 {
		bits = math.Float64bits(*e.Weight)
	}
	ep.regWeight.Store(bits)
}

// releaseAdded stops the added endpoints' probers when the group goes.
func (g *vllmGroup) releaseAdded() {
	g.adds.mu.Lock()
	defer g.adds.mu.Unlock()
	g.adds.off = true
	if a := g.added.Swap(nil); a != nil {
		for _, ep := range a.eps {
			g.adds.unspawn(ep)
		}
	}
}

// all yields the group's endpoints: the config's, then the registry's.
func (g *vllmGroup) all() iter.Seq[*endpoint] {
	return func(yield func(*endpoint) bool) {
		for _, ep := range g.endpoints {
			if !yield(ep) {
				return
			}
		}
		if a := g.added.Load(); a != nil {
			for _, ep := range a.eps {
				if !yield(ep) {
					return
				}
			}
		}
	}
}

// lookup returns the group's endpoint of a dial address, added or not.
func (g *vllmGroup) lookup(dial string) *endpoint {
	if ep := g.endpoints[dial]; ep != nil {
		return ep
	}
	if a := g.added.Load(); a != nil {
		for _, ep := range a.eps {
			if ep.dial == dial {
				return ep
			}
		}
	}
	return nil
}
