// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"sync"

	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// The health scheduler's members of the running configs, by key: a new
// config's member carries on from the one it replaces (its level, hold,
// ramp and window), so that a reload does not bring a sick member back
// at full weight. Each config holds the slots of its members while it
// is provisioned.
var healthCarry = reload.NewPool[*carrySlot]()

// carrySlot is the member that holds a key now.
type carrySlot struct {
	mu  sync.Mutex
	cur *HealthMember
}

// memberKey names a weighted set's member across configs.
func memberKey(gw, alias, set string, t *Target) string {
	return reload.Key("set", gw, alias, set, t.Group, t.Model)
}

// EndpointKey names a vllm group's endpoint across configs.
func endpointKey(gw, group, dial string) string {
	return reload.Key("endpoint", gw, group, dial)
}

// Carry takes over the state of the member that had hm's key, if any,
// and puts hm in its place.
func (hm *HealthMember) Carry(key string) {
	hm.key = key
	slot, _, _ := healthCarry.Acquire(key, func() (*carrySlot, error) { return new(carrySlot), nil })
	slot.mu.Lock()
	old := slot.cur
	slot.cur = hm
	hm.prev = old
	if old != nil {
		old.prev = nil // no chain of configs
	}
	slot.mu.Unlock()
	hm.slot = slot
	if old == nil {
		return
	}
	old.set.mu.Lock()
	hm.score.Carry(old.score)
	old.set.mu.Unlock()
}

// Uncarry lets go of the scheduled sets' members: a newer config's member keeps
// its place, and a config that failed to start hands the place back to
// the one still running.
func (s *Schedule) Uncarry() {
	for _, hs := range s.HealthSets {
		for _, hm := range hs.members {
			if hm.slot == nil {
				continue
			}
			hm.slot.mu.Lock()
			if hm.slot.cur == hm {
				hm.slot.cur = nil
				if prev := hm.prev; prev != nil && !prev.set.stopped.Load() {
					hm.slot.cur = prev
				}
			}
			hm.slot.mu.Unlock()
			hm.slot = nil
			_ = healthCarry.Release(hm.key)
		}
	}
	for _, hs := range s.HealthSets {
		hs.stopped.Store(true)
	}
}
