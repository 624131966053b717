// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package degrade

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

var nan = math.NaN()

// The seed's latency trigger: p99 over 1.5 × SLO confirmed by a queue
// over 10; off again at the SLO (or half the queue), not before the dwell.
func TestLatencyTriggerNeedsTheQueueAndHoldsItsDwell(t *testing.T) {
	tr := NewTrigger(Config{SLO: 2 * time.Second})
	if d, _ := tr.Observe(t0, Signals{P99: 3.5, Queue: 4, KV: nan}); d.Active {
		t.Fatal("a slow p99 without a queue degraded")
	}
	d, changed := tr.Observe(t0.Add(time.Second), Signals{P99: 3.5, Queue: 14, KV: nan})
	if !d.Active || !changed || d.Reason != ReasonSLO || d.Metadata["p99_latency_ms"] != 3500 || d.Metadata["queue_depth"] != 14 {
		t.Fatalf("slow with a queue: %+v", d)
	}
	if d.Why != "p99=3.5s > 1.5×2s, queue=14 > 10" {
		t.Errorf("why: %q", d.Why)
	}
	// well again, within the dwell: held
	if d, _ := tr.Observe(t0.Add(5*time.Second), Signals{P99: 0.5, Queue: 0, KV: nan}); !d.Active {
		t.Fatal("off within the dwell")
	}
	// in the dead band (over the SLO, under 1.5×): held
	if d, _ := tr.Observe(t0.Add(20*time.Second), Signals{P99: 2.5, Queue: 12, KV: nan}); !d.Active {
		t.Fatal("off in the dead band")
	}
	// unknown signals hold the state
	if d, _ := tr.Observe(t0.Add(21*time.Second), Signals{P99: nan, Queue: nan, KV: nan}); !d.Active {
		t.Fatal("off on unknown signals")
	}
	if d, changed := tr.Observe(t0.Add(22*time.Second), Signals{P99: 1.9, Queue: 12, KV: nan}); d.Active || !changed {
		t.Fatalf("at the SLO: %+v", d)
	}
}

// The KV trigger needs usage over its level and rising over the window;
// a high but flat usage is no warning, and one that flattens ends it.
func TestKVTriggerNeedsARisingUsage(t *testing.T) {
	tr := NewTrigger(Config{Dwell: time.Second})
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for i, kv := range []float64{0.90, 0.90, 0.90, 0.90, 0.90, 0.90} {
		if d, _ := tr.Observe(at(float64(i)), Signals{P99: nan, Queue: nan, KV: kv}); d.Active {
			t.Fatalf("flat at 90%%: %+v", d)
		}
	}
	tr = NewTrigger(Config{Dwell: time.Second})
	var d Decision
	for i, kv := range []float64{0.80, 0.83, 0.86, 0.88} {
		d, _ = tr.Observe(at(float64(i)), Signals{P99: nan, Queue: nan, KV: kv})
	}
	if !d.Active || d.Reason != ReasonKV || d.Metadata["kv_slope_per_s"] < 0.02 {
		t.Fatalf("rising past 85%%: %+v", d)
	}
	// it flattens: off after the dwell
	for i, kv := range []float64{0.88, 0.88, 0.88, 0.88, 0.88, 0.88, 0.88} {
		d, _ = tr.Observe(at(4+float64(i)), Signals{P99: nan, Queue: nan, KV: kv})
	}
	if d.Active {
		t.Fatalf("flat again: %+v", d)
	}
}

// The share counts answers over a sliding window, and the cap refuses the
// degraded answer that would pass it.
func TestShareSlidesAndCaps(t *testing.T) {
	s := NewShare(time.Minute)
	for i := range 80 {
		s.Add(t0.Add(time.Duration(i)*100*time.Millisecond), false)
	}
	for i := range 20 {
		s.Add(t0.Add(8*time.Second+time.Duration(i)*100*time.Millisecond), true)
	}
	now := t0.Add(10 * time.Second)
	if r := s.Ratio(now); r != 0.2 {
		t.Fatalf("share %v, want 0.2", r)
	}
	if s.Allows(now, 0.2, 10) {
		t.Error("one more degraded answer passes a 20% cap")
	}
	if !s.Allows(now, 1, 10) {
		t.Error("a cap of 100% refused")
	}
	// a minute later the window has forgotten them
	if a, d := s.At(now.Add(time.Minute)); a != 0 || d != 0 {
		t.Errorf("after a minute: %d answered, %d degraded", a, d)
	}
	// an idle alias's first degraded answers are judged on minAnswers
	idle := NewShare(time.Minute)
	if !idle.Allows(t0, 0.2, 10) {
		t.Error("the first degraded answer of an idle alias refused")
	}
	idle.Add(t0, true)
	idle.Add(t0, true)
	if idle.Allows(t0, 0.2, 10) {
		t.Error("a third degraded answer of 3 passes a 20% cap")
	}
}

// Off is held the dwell too: a trigger that just turned off does not turn
// on again at the next tick.
func TestDwellHoldsBothStates(t *testing.T) {
	tr := NewTrigger(Config{SLO: time.Second, Dwell: 10 * time.Second})
	slow := Signals{P99: 2, Queue: 20, KV: nan}
	tr.Observe(t0, slow)
	if d, _ := tr.Observe(t0.Add(11*time.Second), Signals{P99: 0.5, Queue: 0, KV: nan}); d.Active {
		t.Fatal("not off after the dwell")
	}
	if d, _ := tr.Observe(t0.Add(12*time.Second), slow); d.Active {
		t.Fatal("on again within the off state's dwell")
	}
	if d, _ := tr.Observe(t0.Add(21*time.Second), slow); !d.Active {
		t.Fatal("not on after the off state's dwell")
	}
}

// Reserved places count against the cap: requests in flight that degrade
// at once cannot all pass it.
func TestReservationsCountAgainstTheCap(t *testing.T) {
	s := NewShare(time.Minute)
	granted := 0
	for range 50 {
		if s.Reserve(t0, 0.2, 10) {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("%d of 50 concurrent degraded requests reserved, want 2 (20%% of 10)", granted)
	}
	s.Add(t0, true)
	s.Release()
	s.Add(t0, true)
	s.Release()
	if r := s.Judged(t0, 10); r != 0.2 {
		t.Errorf("judged share %v", r)
	}
	if s.Allows(t0, 0.2, 10) {
		t.Error("a third degraded answer passes the cap")
	}
}
