// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
)

// driveProcessClock gives the gateways and policies a whole Caddy loads
// during the test a clock moved by hand (their background loops read it
// too), and gives them the system's again after.
func driveProcessClock(t *testing.T) *clock.Manual {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	clock.Process = clk
	t.Cleanup(func() { clock.Process = clock.System })
	return clk
}

// fakeClock is a test's clock, moved by hand.
func fakeClock(t *testing.T) *clock.Manual {
	t.Helper()
	return clock.NewManual(time.Unix(1_800_000_000, 0))
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
