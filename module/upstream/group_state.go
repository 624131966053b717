// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/overflow"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// groupStates holds what a group keeps across reloads: its overflow
// state and breakers, by gateway and group name.
var groupStates = reload.NewPool[*GroupState]()

// GroupState is a group's state that outlives config reloads: what
// operators set through the admin API (drains) and what the gateway
// learned (overflow, breakers).
type GroupState struct {
	Drained   atomic.Bool
	Overflow  overflow.State
	Breaker   breaker.Breaker
	mu        sync.Mutex
	endpoints map[string]*EndpointState // by endpoint address
	queue     *priority.Waitlist        // with classes: sheddable requests waiting
}

// Waitlist is the group's queue of sheddable requests, of size from now
// on: the same across reloads, so that those waiting under the config
// before keep their places, and slots the new one gives back wake them.
func (s *GroupState) Waitlist(size int) *priority.Waitlist {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue == nil {
		s.queue = priority.NewWaitlist(size)
	} else {
		s.queue.Resize(size)
	}
	return s.queue
}

// NewGroupState is a group's state as it starts: nothing drained,
// learned or held.
func NewGroupState() *GroupState {
	return &GroupState{endpoints: make(map[string]*EndpointState)}
}

// EndpointState is an endpoint's state that outlives config reloads.
type EndpointState struct {
	Drained atomic.Bool
	Breaker breaker.Breaker
}

// Endpoint returns the shared state of one endpoint of the group.
func (gs *GroupState) Endpoint(dial string) *EndpointState {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	es := gs.endpoints[dial]
	if es == nil {
		es = new(EndpointState)
		gs.endpoints[dial] = es
	}
	return es
}

// DrainedEndpoints lists the addresses of the group's drained endpoints,
// sorted.
func (gs *GroupState) DrainedEndpoints() []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var dials []string
	for dial, es := range gs.endpoints {
		if es.Drained.Load() {
			dials = append(dials, dial)
		}
	}
	slices.Sort(dials)
	return dials
}
