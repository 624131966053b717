// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// fakeClock is a test's clock, moved by hand.
func fakeClock(t *testing.T) *clock.Manual {
	t.Helper()
	return clock.NewManual(time.Unix(1_800_000_000, 0))
}

// newFront is f with empty books where it has none, as a gateway's front
// always has.
func newFront(f Front) *Front {
	if f.Money == nil {
		f.Money = new(money.Money)
	}
	return &f
}

// kitOf is the kit the targets of a route built by hand get their gates
// and observers from, as the gateway's targets do.
func kitOf(f *Front) routing.TargetKit {
	return routing.NewTargetKit(f.Clock, f.Logger, f.Money, time.Duration(f.Deadline))
}
