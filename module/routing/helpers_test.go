// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
)

// fakeClock is a test's clock, moved by hand.
func fakeClock(t *testing.T) *clock.Manual {
	t.Helper()
	return clock.NewManual(time.Unix(1_800_000_000, 0))
}
