// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"sort"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// NewEndpointHealth sets up health-score scheduling of a vllm
// group's endpoints: each is scored over its own window of the group's
// requests, as a weighted set's members are, and one taken out gets no
// request (the others take its share) until it ramps back.
func NewEndpointHealth(gw string, c clock.Clock, logger *zap.Logger, grp *upstream.Group) (*SetHealth, error) {
	hc := grp.Health
	if hc == nil {
		return nil, nil
	}
	vg := grp.VLLM
	if vg == nil {
		return nil, fmt.Errorf("health applies to groups of kind %s (a weighted set's health watches any target)", upstream.KindVLLM)
	}
	p, err := hc.Policy()
	if err != nil {
		return nil, err
	}
	hs := &SetHealth{gateway: gw, group: grp.Run.Name, logger: logger, clock: c}
	hs.scores.MaxOut = hc.MaxDegraded
	dials := make([]string, 0, len(vg.Endpoints))
	for dial := range vg.Endpoints {
		dials = append(dials, dial)
	}
	sort.Strings(dials)
	for _, dial := range dials {
		ep := vg.Endpoints[dial]
		m := &healthscore.Member{Name: grp.Run.Name + "/" + dial, Policy: p, Window: healthscore.NewWindow(hc.WindowLength()),
			Base: upstream.EndpointBase, Since: c.Now()}
		hm := &HealthMember{set: hs, score: m, endpoint: ep}
		hm.Carry(endpointKey(gw, grp.Run.Name, dial))
		ep.Score = &upstream.EndpointScore{Member: hm}
		hs.scores.Members = append(hs.scores.Members, m)
		hs.members = append(hs.members, hm)
	}
	hs.scores.Rebalance()
	hs.Apply()
	vg.Scored = true
	return hs, nil
}
