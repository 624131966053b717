// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
)

// The ledger's demand is integrated from the attempts themselves (see
// module/books): each occupies its share of the GPUs from its start to
// its end.

// provisionOccupancy sets each group's share of the GPUs per request in
// flight: for a vllm group with a cost model, its GPUs divided by its
// sequence slots; for an openai group, the same share of the self-hosted
// GPUs (a cloud request in flight is counted as one slot of them). Without
// self-hosted GPUs in the cost model there is no comparison to make, and
// nothing is counted.
func (m *money) provisionOccupancy() {
	var gpus, slots float64
	for _, name := range sortedKeys(m.groups) {
		grp := m.groups[name]
		if vg := grp.VLLM; vg != nil && grp.Cost != nil && grp.Cost.GPUs > 0 && len(vg.Endpoints) > 0 {
			n := 0.0
			for _, ep := range vg.Endpoints {
				n += float64(vg.SeqSlots(ep))
			}
			grp.Run.Occupancy = grp.Cost.GPUs / n
			gpus += grp.Cost.GPUs
			slots += n
		}
	}
	if slots == 0 {
		return
	}
	m.cloudSlotGPUs, m.selfGPUs = gpus/slots, gpus
	for _, grp := range m.groups {
		if grp.Kind == KindOpenAI {
			grp.Run.Occupancy = m.cloudSlotGPUs
		}
	}
}

// occupancyObserver counts an attempt in the ledger's demand while it
// runs, failed or not (the GPUs were occupied): self and cloud GPU
// equivalents.
type occupancyObserver struct {
	ledger      *books.Ledger
	self, cloud float64
}

// occupancyOf is the observer of attempts on t for the ledger, if its
// group occupies GPUs.
func occupancyOf(l *books.Ledger, t *Target) (occupancyObserver, bool) {
	occ := t.group.Run.Occupancy
	if occ <= 0 || l == nil {
		return occupancyObserver{}, false
	}
	if t.group.Kind == KindOpenAI {
		return occupancyObserver{ledger: l, cloud: occ}, true
	}
	return occupancyObserver{ledger: l, self: occ}, true
}

func (o occupancyObserver) attemptBegan(ctx context.Context, _ *attemptRecord) context.Context {
	o.ledger.Occupy(o.ledger.Clock().Now(), o.self, o.cloud)
	return ctx
}

func (o occupancyObserver) attemptEnded(*attemptRecord) { o.ledger.Vacate(o.self, o.cloud) }
