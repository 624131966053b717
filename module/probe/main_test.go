// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/tests/testhome"
)

// TestMain keeps the tests off the user's own Caddy directories: a
// group's transport is provisioned in a Caddy context.
func TestMain(m *testing.M) { testhome.Main(m) }

// waitUntil polls cond, which a prober's own loops make true, for up to
// ten seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
