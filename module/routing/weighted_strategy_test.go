// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"math"
	"testing"
)

// The best member keeps its weight, the others get best/theirs of it but
// never under a tenth, and a member with no figure keeps its weight.
func TestLeanTowardsLowest(t *testing.T) {
	got := leanTowardsLowest([]float64{math.NaN(), 100, 200, 2000, 100})
	want := []float64{1, 1, 0.5, minLean, 1}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("member %d: %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
	// a free member (a self-hosted group's marginal token) leaves the
	// priced ones their least share
	if got := leanTowardsLowest([]float64{0, 0.75}); got[0] != 1 || got[1] != minLean {
		t.Errorf("free vs priced: %v", got)
	}
	if got := leanTowardsLowest([]float64{math.NaN(), math.NaN()}); got[0] != 1 || got[1] != 1 {
		t.Errorf("nothing known: %v", got)
	}
}

// A leaned weight keeps at least 1 (a hundredth) while its member has a
// weight, and 0 stays 0.
func TestLeanedWeightsKeepEveryMember(t *testing.T) {
	ws := &WeightedSet{lean: []float64{1, minLean, minLean}}
	if got := ws.leaned(0, 6000); got != 6000 {
		t.Errorf("best member: %d", got)
	}
	if got := ws.leaned(1, 4000); got != 400 {
		t.Errorf("leaned member: %d, want 400", got)
	}
	if got := ws.leaned(2, 0); got != 0 {
		t.Errorf("weight 0 leaned to %d", got)
	}
	if got := ws.leaned(1, 1); got != 1 {
		t.Errorf("the smallest weight leaned to %d", got)
	}
}
