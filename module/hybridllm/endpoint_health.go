// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync/atomic"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
	"go.uber.org/zap"
)

// endpointBase is each endpoint's weight in its group's scheduler: the
// scheduler's weights read as percentages of a whole endpoint.
const endpointBase = 100

// endpointScore is an endpoint's health-score scheduling in its vllm
// group: its member of the group's scheduler, and the share of a whole
// endpoint it serves at, in hundredths of endpointBase (0: out).
type endpointScore struct {
	hm   *healthMember
	fine atomic.Int64
}

// share returns the endpoint's share of a whole endpoint: 0 when it is
// out, below 1 while it ramps back.
func (es *endpointScore) share() float64 {
	return min(1, float64(es.fine.Load())/(endpointBase*100))
}

// admits draws whether an endpoint ramping back takes this request: with
// the probability of its share (always at a whole share).
func (es *endpointScore) admits() bool {
	f := es.share()
	return f >= 1 || rand.Float64() < f
}

// provisionEndpointHealth sets up health-score scheduling of a vllm
// group's endpoints: each is scored over its own window of the group's
// requests, as a weighted set's members are, and one taken out gets no
// request (the others take its share) until it ramps back.
func provisionEndpointHealth(gw string, c clock.Clock, logger *zap.Logger, grp *Group) (*setHealth, error) {
	hc := grp.Health
	if hc == nil {
		return nil, nil
	}
	vg := grp.vllm
	if vg == nil {
		return nil, fmt.Errorf("health applies to groups of kind %s (a weighted set's health watches any target)", KindVLLM)
	}
	p, err := hc.Policy()
	if err != nil {
		return nil, err
	}
	hs := &setHealth{gw: gw, group: grp.run.name, logger: logger, clock: c}
	hs.s.MaxOut = hc.MaxDegraded
	dials := make([]string, 0, len(vg.endpoints))
	for dial := range vg.endpoints {
		dials = append(dials, dial)
	}
	sort.Strings(dials)
	for _, dial := range dials {
		ep := vg.endpoints[dial]
		m := &healthscore.Member{Name: grp.run.name + "/" + dial, Policy: p, Window: healthscore.NewWindow(hc.WindowLength()),
			Base: endpointBase, Since: c.Now()}
		hm := &healthMember{hs: hs, m: m, ep: ep}
		hm.carry(endpointKey(gw, grp.run.name, dial))
		ep.score = &endpointScore{hm: hm}
		hs.s.Members = append(hs.s.Members, m)
		hs.members = append(hs.members, hm)
	}
	hs.s.Rebalance()
	hs.apply()
	vg.scored = true
	return hs, nil
}
