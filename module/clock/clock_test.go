// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package clock

import (
	"sync"
	"testing"
	"time"
)

// A manual clock reads what it was set to, moves by exactly what it is
// told, and is read safely while it moves.
func TestManualMovesOnlyWhenTold(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	m := NewManual(t0)
	if got := m.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	if got := m.Advance(90 * time.Second); !got.Equal(t0.Add(90*time.Second)) || !m.Now().Equal(got) {
		t.Fatalf("Advance = %v, Now = %v, want %v", got, m.Now(), t0.Add(90*time.Second))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if m.Now().Before(t0) {
					t.Error("the clock went back")
					return
				}
			}
		}()
	}
	for range 100 {
		m.Advance(time.Millisecond)
	}
	wg.Wait()
	if got, want := m.Now(), t0.Add(90*time.Second+100*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after 100 steps Now = %v, want %v", got, want)
	}
}

// The system clock is the machine's.
func TestSystemIsTheMachinesClock(t *testing.T) {
	before := time.Now()
	got := System.Now()
	if got.Before(before) || got.Sub(before) > time.Hour {
		t.Fatalf("System.Now = %v, time.Now was %v", got, before)
	}
}
