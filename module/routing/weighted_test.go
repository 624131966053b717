// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"strings"
	"testing"
)

func TestSWRRIsSmooth(t *testing.T) {
	rr := newSWRR([]int{60, 40})
	var seq strings.Builder
	counts := [2]int{}
	for range 10 {
		i := rr.next()
		counts[i]++
		seq.WriteByte("ab"[i])
	}
	// 6 to 4, interleaved: never three of the heavier in a row
	if counts != [2]int{6, 4} || strings.Contains(seq.String(), "aaa") {
		t.Errorf("picks %s", seq.String())
	}
	if i := newSWRR([]int{0, 0}).next(); i != -1 {
		t.Errorf("all weights 0: picked %d", i)
	}
	zero := newSWRR([]int{0, 5})
	for range 5 {
		if i := zero.next(); i != 1 {
			t.Fatalf("a member of weight 0 was picked")
		}
	}
}

// Weights that move between picks (a strategy's, a ramp's) keep their
// shares: the rotation is not restarted, which would give every pick to
// the heaviest member.
func TestSWRRKeepsItsPlaceWhenWeightsMove(t *testing.T) {
	rr := newSWRR([]int{300, 100})
	counts := [2]int{}
	for i := range 400 {
		rr.setAll([]int{300 + i%2, 100}) // a weight that jitters
		counts[rr.next()]++
	}
	if counts[1] < 90 || counts[1] > 110 {
		t.Errorf("the lighter member got %d of 400 picks, want about 100", counts[1])
	}
	// a member put at 0 leaves the rotation at once
	rr.setAll([]int{0, 100})
	for range 5 {
		if rr.next() != 1 {
			t.Fatal("a member at 0 was picked")
		}
	}
}

func TestWeightedOrder(t *testing.T) {
	w := func(n int) *int { return &n }
	a := &Target{Group: "a", Set: "s", Weight: w(60)}
	b := &Target{Group: "b", Set: "s", Weight: w(40)}
	z := &Target{Group: "z", Set: "s", Weight: w(0)}
	last := &Target{Group: "last"}
	al := &Alias{Targets: []*Target{a, b, z, last}}
	if err := al.provisionSets("test"); err != nil {
		t.Fatal(err)
	}
	firsts := map[string]int{}
	var buf [6]*Target
	for range 100 {
		plan := al.Ordered(al.Targets, buf[:])
		if len(plan) != 3 || plan[2] != last {
			t.Fatalf("plan %v", groups(plan))
		}
		// the other member follows, then the target after the set; z never
		if plan[0] == plan[1] || (plan[0] != a && plan[0] != b) {
			t.Fatalf("plan %v", groups(plan))
		}
		firsts[plan[0].Group]++
	}
	if firsts["a"] != 60 || firsts["b"] != 40 {
		t.Errorf("first picks %v", firsts)
	}
	// a tail that starts after the set is left as it is
	if plan := al.Ordered(al.Targets[3:], buf[:]); len(plan) != 1 || plan[0] != last {
		t.Errorf("tail %v", groups(plan))
	}

	for _, bad := range [][]*Target{
		{{Group: "a", Weight: w(1)}},                                   // a weight outside a set
		{{Group: "a", Set: "s"}, {Group: "b"}, {Group: "c", Set: "s"}}, // a set split in two
		{{Group: "a", Set: "s", Weight: w(-1)}},                        // a negative weight
	} {
		if err := (&Alias{Targets: bad}).provisionSets("test"); err == nil {
			t.Errorf("accepted %v", groups(bad))
		}
	}
}

func groups(ts []*Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Group)
	}
	return out
}

// BenchmarkWeightedPick is the cost of ordering a set of three for one
// request.
func BenchmarkWeightedPick(b *testing.B) {
	w := func(n int) *int { return &n }
	al := &Alias{Targets: []*Target{{Group: "a", Set: "s", Weight: w(60)}, {Group: "b", Set: "s", Weight: w(30)},
		{Group: "c", Set: "s", Weight: w(10)}, {Group: "last"}}}
	if err := al.provisionSets("test"); err != nil {
		b.Fatal(err)
	}
	var buf [6]*Target
	b.ReportAllocs()
	for b.Loop() {
		if plan := al.Ordered(al.Targets, buf[:]); len(plan) != 4 {
			b.Fatal(len(plan))
		}
	}
}
