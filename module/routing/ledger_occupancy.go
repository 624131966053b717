// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"

	"github.com/hybridllm/caddy-hybrid-llm/module/books"
)

// The ledger's demand is integrated from the attempts themselves (see
// module/books): each occupies its share of the GPUs from its start to
// its end.

// OccupancyObserver counts an attempt in the ledger's demand while it
// runs, failed or not (the GPUs were occupied): self and cloud GPU
// equivalents.
type OccupancyObserver struct {
	ledger      *books.Ledger
	self, cloud float64
}

// OccupancyOf is the observer of attempts on t for the ledger, if its
// group occupies GPUs.
func OccupancyOf(l *books.Ledger, t *Target) (OccupancyObserver, bool) {
	occ := t.Upstream.Run.Occupancy
	if occ <= 0 || l == nil {
		return OccupancyObserver{}, false
	}
	if t.Upstream.Cloud() {
		return OccupancyObserver{ledger: l, cloud: occ}, true
	}
	return OccupancyObserver{ledger: l, self: occ}, true
}

func (o OccupancyObserver) AttemptBegan(ctx context.Context, _ *AttemptRecord) context.Context {
	o.ledger.Occupy(o.ledger.Clock().Now(), o.self, o.cloud)
	return ctx
}

func (o OccupancyObserver) AttemptEnded(*AttemptRecord) { o.ledger.Vacate(o.self, o.cloud) }
