// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"sort"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// provisionEndpointHealth sets up health-score scheduling of a vllm
// group's endpoints: each is scored over its own window of the group's
// requests, as a weighted set's members are, and one taken out gets no
// request (the others take its share) until it ramps back.
func provisionEndpointHealth(gw string, c clock.Clock, logger *zap.Logger, grp *Group) (*routing.SetHealth, error) {
	hc := grp.Health
	if hc == nil {
		return nil, nil
	}
	vg := grp.VLLM
	if vg == nil {
		return nil, fmt.Errorf("health applies to groups of kind %s (a weighted set's health watches any target)", KindVLLM)
	}
	p, err := hc.Policy()
	if err != nil {
		return nil, err
	}
	hs := &routing.SetHealth{Gateway: gw, Group: grp.Run.Name, Logger: logger, Clock: c}
	hs.Scores.MaxOut = hc.MaxDegraded
	dials := make([]string, 0, len(vg.Endpoints))
	for dial := range vg.Endpoints {
		dials = append(dials, dial)
	}
	sort.Strings(dials)
	for _, dial := range dials {
		ep := vg.Endpoints[dial]
		m := &healthscore.Member{Name: grp.Run.Name + "/" + dial, Policy: p, Window: healthscore.NewWindow(hc.WindowLength()),
			Base: upstream.EndpointBase, Since: c.Now()}
		hm := &routing.HealthMember{Sched: hs, Score: m, Endpoint: ep}
		hm.Carry(routing.EndpointKey(gw, grp.Run.Name, dial))
		ep.Score = &upstream.EndpointScore{Member: hm}
		hs.Scores.Members = append(hs.Scores.Members, m)
		hs.Members = append(hs.Members, hm)
	}
	hs.Scores.Rebalance()
	hs.Apply()
	vg.Scored = true
	return hs, nil
}
