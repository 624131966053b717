// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package lograte

import (
	"testing"
	"time"
)

func TestWarnEvery(t *testing.T) {
	var w Every
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {time.Second, false}, {59 * time.Second, false}, {time.Minute, true}, {90 * time.Second, false}, {3 * time.Minute, true}} {
		if got := w.Allow(t0.Add(tc.after)); got != tc.want {
			t.Errorf("at +%v: %v", tc.after, got)
		}
	}
}

// A nil Every lets every warning through.
func TestNilEveryAllows(t *testing.T) {
	var w *Every
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !w.Allow(t0) || !w.Allow(t0) {
		t.Error("a nil Every held a warning back")
	}
}
