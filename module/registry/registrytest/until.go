// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package registrytest

import (
	"testing"
	"time"
)

// Until waits for a value from ch (the snapshots a watcher hands on) for
// which ok holds, up to 20 s, and returns it.
func Until[T any](t *testing.T, ch <-chan T, what string, ok func(T) bool) T {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case v := <-ch:
			if ok(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("no snapshot with %s within 20s", what)
		}
	}
}
