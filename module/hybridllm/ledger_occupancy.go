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
	occ := t.Upstream.Run.Occupancy
	if occ <= 0 || l == nil {
		return occupancyObserver{}, false
	}
	if t.Upstream.Kind == KindOpenAI {
		return occupancyObserver{ledger: l, cloud: occ}, true
	}
	return occupancyObserver{ledger: l, self: occ}, true
}

func (o occupancyObserver) AttemptBegan(ctx context.Context, _ *AttemptRecord) context.Context {
	o.ledger.Occupy(o.ledger.Clock().Now(), o.self, o.cloud)
	return ctx
}

func (o occupancyObserver) AttemptEnded(*AttemptRecord) { o.ledger.Vacate(o.self, o.cloud) }
