// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
)

// take reserves a slot of class c in the group, or says why there is
// none; the slot stays held.
func take(g *VLLMGroup, pool reverseproxy.UpstreamPool, c priority.Class) (*Slot, reason) {
	slot := &Slot{Group: g, Model: "qwen", Class: c}
	if g.selectEndpoint(pool, slot) == nil {
		return nil, slot.Skip
	}
	return slot, ""
}

// With classes, each class fills its share of an endpoint's red line
// (8: max_num_seqs 6 + max_queue 2): batch 4, standard 6, interactive
// all 8; a class past its share is passed over as class_reserve while a
// higher class still gets in; a slot given back wakes a sheddable
// request waiting.
func TestClassesShareTheRedLine(t *testing.T) {
	clk := fakeClock(t)
	g, pool := affineGroup(t, clk, fourDials[:1], nil)
	g.Settings.maxLoad, g.Settings.maxNumSeqs, g.Settings.maxQueue = 0, 6, 2
	shares, err := (&priority.Config{QueueSize: 1}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	g.Settings.classes = shares

	var held []*Slot
	fill := func(c priority.Class, want int) {
		t.Helper()
		n := 0
		for {
			s, why := take(g, pool, c)
			if s == nil {
				if why != because.ClassReserve && why != because.RedLine {
					t.Fatalf("%v passed over as %q", c, why)
				}
				if (c == priority.Interactive) != (why == because.RedLine) {
					t.Errorf("%v passed over as %q: only interactive meets the red line itself", c, why)
				}
				break
			}
			held = append(held, s)
			n++
		}
		if n != want {
			t.Errorf("%v took %d more slots, want %d", c, n, want)
		}
	}
	fill(priority.Batch, 4)
	fill(priority.Standard, 2)
	fill(priority.Interactive, 2)
	if got := g.Endpoints[fourDials[0]].Prober.Inflight.Load(); got != 8 {
		t.Fatalf("in flight %d, want the red line, 8", got)
	}

	// a sheddable request waits; the next slot given back wakes it
	tk := shares.Queue.Enter()
	if tk == nil || shares.Queue.Enter() != nil {
		t.Fatal("a queue of one takes one")
	}
	defer tk.Leave()
	tk.Arm()
	held[len(held)-1].Release()
	if !tk.Wait(t.Context(), closed()) {
		t.Error("a slot given back did not wake the waiting request")
	}
	// the freed slot is interactive's: batch still finds its share full
	if s, why := take(g, pool, priority.Batch); s != nil || why != because.ClassReserve {
		t.Errorf("batch over its share: %v %q", s, why)
	}
	for _, s := range held[:len(held)-1] {
		s.Release()
	}
	if s, _ := take(g, pool, priority.Batch); s == nil {
		t.Error("an empty endpoint refused batch")
	}
}

// closed is a deadline that has passed: Wait reports only a wake that
// came already.
func closed() chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// A group's queue is the same across reloads (its shared state's), sized
// by the config in force.
func TestQueueOutlivesReloads(t *testing.T) {
	s := NewGroupState()
	before := s.Waitlist(4)
	tk := before.Enter()
	defer tk.Leave()
	after := s.Waitlist(8)
	if after != before || after.Len() != 1 || after.Size() != 8 {
		t.Errorf("after a reload: the same queue %v, %d waiting, size %d", after == before, after.Len(), after.Size())
	}
}
