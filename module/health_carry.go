// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import "sync"

// The health scheduler's members of the running configs, by key: a new
// config's member carries on from the one it replaces (its level, hold,
// ramp and window), so that a reload does not bring a sick member back
// at full weight.
var (
	healthCarryMu sync.Mutex
	healthCarry   = map[string]*healthMember{}
)

// memberKey names a weighted set's member across configs.
func memberKey(gw, alias, set string, t *Target) string {
	return "set\x00" + gw + "\x00" + alias + "\x00" + set + "\x00" + t.Group + "\x00" + t.Model
}

// endpointKey names a vllm group's endpoint across configs.
func endpointKey(gw, group, dial string) string {
	return "endpoint\x00" + gw + "\x00" + group + "\x00" + dial
}

// carry takes over the state of the member that had hm's key, if any,
// and puts hm in its place.
func (hm *healthMember) carry(key string) {
	hm.key = key
	healthCarryMu.Lock()
	old := healthCarry[key]
	healthCarry[key] = hm
	hm.prev = old
	if old != nil {
		old.prev = nil // no chain of configs
	}
	healthCarryMu.Unlock()
	if old == nil {
		return
	}
	old.hs.mu.Lock()
	hm.m.Carry(old.m)
	old.hs.mu.Unlock()
}

// uncarry forgets the gateway's members, unless a newer config's took
// their place; a config that failed to start hands the place back to
// the one still running.
func (g *Gateway) uncarry() {
	healthCarryMu.Lock()
	defer healthCarryMu.Unlock()
	for _, hs := range g.healthSets {
		for _, hm := range hs.members {
			if healthCarry[hm.key] != hm {
				continue
			}
			if prev := hm.prev; prev != nil && !prev.hs.stopped.Load() {
				healthCarry[hm.key] = prev
			} else {
				delete(healthCarry, hm.key)
			}
		}
	}
	for _, hs := range g.healthSets {
		hs.stopped.Store(true)
	}
}
