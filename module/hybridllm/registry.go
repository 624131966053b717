// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// gateways holds the live gateway of each name. A reload provisions the
// new config before it cleans up the old one, and a config that fails to
// start is cleaned up while the old one keeps serving: each entry keeps
// every provisioned instance of its name, and the newest one still
// provisioned is the current one. So the running config stays managed
// (state, drains, drills, metrics) until a new one has started, and
// again if the new one fails.
var gateways = reload.NewPool[*gatewayEntry]()

// gatewayEntry is the registry slot of one gateway name.
type gatewayEntry struct {
	current   atomic.Pointer[Gateway]
	mu        sync.Mutex
	instances []instance // oldest first; the last is current
}

// instance is one provisioned gateway of a name, and the config it is of.
type instance struct {
	g   *Gateway
	cfg any
}

// enter makes g the current gateway of its name, in config cfg. Two
// gateways of one config may not share a name.
func enter(g *Gateway, cfg any) (*gatewayEntry, error) {
	entry, _, _ := gateways.Acquire(g.Name, func() (*gatewayEntry, error) { return new(gatewayEntry), nil })
	entry.mu.Lock()
	defer entry.mu.Unlock()
	for _, prev := range entry.instances {
		if prev.cfg == cfg {
			_ = gateways.Release(g.Name)
			return nil, fmt.Errorf("two hybrid_llm handlers named %q in one config: give each its own name", g.Name)
		}
	}
	entry.instances = append(entry.instances, instance{g: g, cfg: cfg})
	entry.current.Store(g)
	return entry, nil
}

// leave drops g. When g was current, the newest instance still
// provisioned (the config that keeps running) becomes current again.
func (e *gatewayEntry) leave(g *Gateway) {
	e.mu.Lock()
	if i := slices.IndexFunc(e.instances, func(in instance) bool { return in.g == g }); i >= 0 {
		e.instances = slices.Delete(e.instances, i, i+1)
	}
	var cur *Gateway
	if n := len(e.instances); n > 0 {
		cur = e.instances[n-1].g
	}
	e.current.Store(cur)
	e.mu.Unlock()
	_ = gateways.Release(g.Name)
}

// liveGateways returns the current gateways, by name.
func liveGateways() []*Gateway {
	var out []*Gateway
	gateways.Range(func(_ string, entry *gatewayEntry) bool {
		if g := entry.current.Load(); g != nil {
			out = append(out, g)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *Gateway) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
