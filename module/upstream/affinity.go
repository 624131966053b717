// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"fmt"
	"math"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
)

// AffinityConfig sends a conversation's requests to the endpoint its
// prefix went to before, where vLLM's prefix cache holds it, within a
// bound on that endpoint's load. The endpoint is a rendezvous (highest
// random weight) choice of the conversation's key among the eligible
// endpoints: every gateway that sees the same endpoints makes the same
// choice, and an endpoint that joins or leaves moves only the
// conversations it wins or held. Unset: endpoints are chosen by load alone.
type AffinityConfig struct {
	// How far above the eligible endpoints' mean load a conversation's
	// endpoint may be and still take its request: with the request, its
	// load at most max_load × (the mean load + one request), rounded up to
	// a whole request (bounded-load consistent hashing's bound, looser by
	// up to a request, so that a conversation keeps its endpoint at low
	// load; in the load score's units, one request is 1/max_num_seqs of
	// the endpoint, by its weight, at least a twentieth; KV-cache usage,
	// a tie-breaker of the score, left out). Past it, the next endpoint in
	// the conversation's order takes the request, and warms. Default:
	// 1.25.
	MaxLoad float64 `json:"max_load,omitempty"`

	// A request header whose value names the conversation (a session id
	// a client sends: x-session-id), and a body field that does (a gjson
	// path: user, metadata.user_id). Either one present keys the
	// conversation instead of its prompt's start: a session the client
	// names wins over the prefix. A key is only a placement hint, held to
	// max_load as any. Default: none, the prompt's start alone.
	SessionHeader string `json:"session_header,omitempty"`
	SessionField  string `json:"session_field,omitempty"`
}

// DefaultMaxLoad is AffinityConfig.MaxLoad's default.
const DefaultMaxLoad = 1.25

// minUnit is the least load one request counts for in the bound: a
// twentieth of a replica (max_num_seqs unknown, or large).
const minUnit = 0.05

// resolve checks the config and returns its max_load.
func (a *AffinityConfig) resolve() (float64, error) {
	switch {
	case a == nil:
		return 0, nil
	case a.MaxLoad == 0:
		return DefaultMaxLoad, nil
	case a.MaxLoad < 1 || math.IsNaN(a.MaxLoad) || math.IsInf(a.MaxLoad, 0):
		return 0, fmt.Errorf("affinity: max_load must be a factor of at least 1, got %v", a.MaxLoad)
	}
	return a.MaxLoad, nil
}

// UnmarshalAffinity parses an affinity block: a vLLM group's, or the
// vllm_least_load policy's. Syntax:
//
//	affinity {
//		max_load <factor>          # default 1.25
//		session_header <name>      # a header naming the conversation
//		session_field  <path>      # a body field naming it (gjson path)
//	}
func UnmarshalAffinity(d *caddyfile.Dispenser) (*AffinityConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	a := new(AffinityConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "max_load":
			v, err := caddyargs.PositiveFloat(d)
			if err != nil {
				return nil, err
			}
			if v < 1 {
				return nil, d.Errf("max_load must be a factor of at least 1, got %v", v)
			}
			a.MaxLoad = v
		case "session_header", "session_field":
			opt := d.Val()
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			if opt == "session_header" {
				a.SessionHeader = d.Val()
			} else {
				a.SessionField = d.Val()
			}
			if d.NextArg() {
				return nil, d.ArgErr()
			}
		default:
			return nil, caddyargs.UnknownOption(d, "affinity option", d.Val(), "max_load", "session_field", "session_header")
		}
	}
	return a, nil
}

// maxAffine is how many of the eligible endpoints a choice ranks for a
// conversation (a group with more keeps the best ranked).
const maxAffine = 16

// affine is an eligible candidate, its rank for the conversation, and
// the load score one more request adds to it.
type affine struct {
	c    candidate
	rank uint64
	unit float64
}

// ranked are a scan's eligible candidates for a conversation's key, and
// the sum of their load scores.
type ranked struct {
	near  [maxAffine]affine
	n     int
	sum   float64
	count int
}

// add ranks candidate c of dial for key; unit is the load score one more
// request adds to it.
func (r *ranked) add(key uint64, dial string, c candidate, unit float64) {
	r.sum += c.score - c.kv
	r.count++
	a := affine{c: c, rank: rendezvous(key, dial), unit: max(unit, minUnit)}
	if r.n < maxAffine {
		r.near[r.n] = a
		r.n++
		return
	}
	low := 0
	for i := 1; i < r.n; i++ {
		if r.near[i].rank < r.near[low].rank {
			low = i
		}
	}
	if a.rank > r.near[low].rank {
		r.near[low] = a
	}
}

// pick is the conversation's endpoint: the best ranked whose load with
// the request is within maxLoad of the mean with it, rounded up to a
// whole request; ok is false when none is. The load is the score without
// its KV-cache tie-breaker.
func (r *ranked) pick(maxLoad float64) (c candidate, ok bool) {
	if r.count == 0 {
		return candidate{}, false
	}
	mean := r.sum / float64(r.count)
	var best *affine
	for i := range r.n {
		a := &r.near[i]
		bound := math.Ceil(maxLoad*(mean+a.unit)/a.unit-1e-9) * a.unit
		if a.c.score-a.c.kv+a.unit <= bound+1e-9 && (best == nil || a.rank > best.rank) {
			best = a
		}
	}
	if best == nil {
		return candidate{}, false
	}
	return best.c, true
}

// rendezvous is an endpoint's rank for a conversation's key: the same on
// every gateway, independent of the other endpoints.
func rendezvous(key uint64, dial string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a of the dial address
	for i := 0; i < len(dial); i++ {
		h ^= uint64(dial[i])
		h *= 1099511628211
	}
	return mix64(h ^ key)
}

// mix64 is splitmix64's finalizer: every bit of x moves every bit of the
// result.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
