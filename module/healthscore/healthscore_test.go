// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package healthscore

import (
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

var t0 = time.Date(2026, 12, 1, 10, 31, 40, 0, time.UTC)

func TestWindowRateAndP99(t *testing.T) {
	w := NewWindow(10 * time.Second)
	for i := range 97 {
		w.Add(t0.Add(time.Duration(i)*10*time.Millisecond), false, 100*time.Millisecond)
	}
	w.Add(t0, false, 1120*time.Millisecond)
	w.Add(t0, false, 1120*time.Millisecond)
	w.Add(t0, true, 0)
	w.Add(t0, true, 0)
	w.Add(t0, true, 0)
	st := w.Stats(t0.Add(time.Second))
	if st.Requests != 102 || st.Errors != 3 {
		t.Fatalf("stats %+v", st)
	}
	// 99 successes: the 99th percentile is the 98th of them, a slow one
	if st.P99 < 1070*time.Millisecond || st.P99 > 1180*time.Millisecond {
		t.Errorf("p99 %v, want about 1120ms", st.P99)
	}
	if st.ErrorRate < 0.029 || st.ErrorRate > 0.03 {
		t.Errorf("error rate %v", st.ErrorRate)
	}

	// one slow answer in a hundred is not the p99
	w = NewWindow(10 * time.Second)
	for range 100 {
		w.Add(t0, false, 200*time.Millisecond)
	}
	w.Add(t0, false, 5*time.Second)
	if p99 := w.Stats(t0).P99; p99 < 190*time.Millisecond || p99 > 210*time.Millisecond {
		t.Errorf("p99 %v, want about 200ms", p99)
	}
}

func TestWindowForgetsWhatLeftTheSpan(t *testing.T) {
	w := NewWindow(10 * time.Second)
	w.Add(t0, true, 0)
	w.Add(t0.Add(5*time.Second), false, time.Second)
	if st := w.Stats(t0.Add(9 * time.Second)); st.Requests != 2 {
		t.Fatalf("within the span: %+v", st)
	}
	st := w.Stats(t0.Add(11 * time.Second))
	if st.Requests != 1 || st.Errors != 0 || st.P99 < 950*time.Millisecond {
		t.Fatalf("the first request should have left: %+v", st)
	}
	if st := w.Stats(t0.Add(16 * time.Second)); st.Requests != 0 || st.P99 != 0 {
		t.Fatalf("empty window: %+v", st)
	}
	// a slot reused much later starts empty
	w.Add(t0.Add(time.Hour), false, 10*time.Millisecond)
	if st := w.Stats(t0.Add(time.Hour)); st.Requests != 1 || st.P99 > 11*time.Millisecond {
		t.Fatalf("after an hour: %+v", st)
	}
	w.Reset()
	if st := w.Stats(t0.Add(time.Hour)); st.Requests != 0 {
		t.Fatalf("after Reset: %+v", st)
	}
}

// seedSet is the seed's set: priv-cloud-1 at 60, pub-cloud-a at 40,
// degraded above a 5% error rate or an 800 ms p99.
func seedSet() (*Set, *Member, *Member) {
	p := Policy{ErrorRate: 0.05, P99: 800 * time.Millisecond}.WithDefaults()
	a := &Member{Name: "priv-cloud-1", Policy: p, Window: NewWindow(DefaultWindow), Base: 60}
	b := &Member{Name: "pub-cloud-a", Policy: p, Window: NewWindow(DefaultWindow), Base: 40}
	s := &Set{Members: []*Member{a, b}}
	s.Rebalance()
	return s, a, b
}

func feed(m *Member, at time.Time, n, errs int, lat time.Duration) {
	for i := range n {
		m.Record(at, i < errs, lat)
	}
}

func kinds(ev []Event) []EventKind {
	var ks []EventKind
	for _, e := range ev {
		ks = append(ks, e.Kind)
	}
	return ks
}

func TestSchedulerDegradesAndRampsBack(t *testing.T) {
	s, priv, pub := seedSet()
	if priv.Weight != 60 || pub.Weight != 40 {
		t.Fatalf("weights %d/%d", priv.Weight, pub.Weight)
	}
	now := t0
	feed(priv, now, 100, 0, 100*time.Millisecond)
	feed(pub, now, 50, 0, 700*time.Millisecond) // 700 > 0.8 × 800: alert only
	ev := s.Tick(now)
	if !slices.Equal(kinds(ev), []EventKind{EventAlert}) || pub.Level != Alert || pub.Weight != 40 {
		t.Fatalf("alert: %v, %v at %d", kinds(ev), pub.Level, pub.Weight)
	}

	// the seed's incident: p99 1120 ms, 6.1% errors
	now = now.Add(2 * time.Second)
	pub.Window.Reset()
	feed(pub, now, 49, 3, 1120*time.Millisecond)
	pub.Inflight = 4
	ev = s.Tick(now)
	if !slices.Equal(kinds(ev), []EventKind{EventDegrade, EventWeight, EventWeight}) {
		t.Fatalf("degrade: %v", kinds(ev))
	}
	if ev[0].Stats.P99 < 1070*time.Millisecond || ev[0].Stats.ErrorRate < 0.061 || ev[0].Stats.ErrorRate > 0.062 {
		t.Errorf("the degrade event's numbers: %+v", ev[0].Stats)
	}
	if priv.Weight != 100 || pub.Weight != 0 || pub.Level != Degraded {
		t.Fatalf("after the degrade: %d/%d, %v", priv.Weight, pub.Weight, pub.Level)
	}
	// its last requests finish: traffic is fully on the other member
	pub.Inflight = 0
	now = now.Add(250 * time.Millisecond)
	if ev := s.Tick(now); !slices.Equal(kinds(ev), []EventKind{EventDrained}) {
		t.Fatalf("drained: %v", kinds(ev))
	}

	// the hold, then steps of a quarter of its weight
	now = now.Add(DefaultHold - 300*time.Millisecond)
	if ev := s.Tick(now); len(ev) != 0 {
		t.Fatalf("within the hold: %v", kinds(ev))
	}
	now = now.Add(100 * time.Millisecond)
	s.Tick(now)
	if pub.Level != Recovering || pub.Weight != 10 || priv.Weight != 90 {
		t.Fatalf("first step: %v %d/%d", pub.Level, priv.Weight, pub.Weight)
	}
	var weights []int
	for range 8 {
		now = now.Add(time.Second)
		feed(pub, now, 5, 0, 100*time.Millisecond)
		feed(priv, now, 5, 0, 100*time.Millisecond)
		ev = s.Tick(now)
		weights = append(weights, pub.Weight)
	}
	if !slices.Equal(weights, []int{10, 20, 20, 30, 30, 40, 40, 40}) {
		t.Errorf("ramp %v", weights)
	}
	if pub.Level != OK || priv.Weight != 60 {
		t.Errorf("after the ramp: %v, %d", pub.Level, priv.Weight)
	}
}

// degradedSeedSet is the seed's set with pub-cloud-a degraded at t0 by
// a 10% error rate.
func degradedSeedSet(t *testing.T) (*Set, *Member, *Member) {
	t.Helper()
	s, priv, pub := seedSet()
	feed(priv, t0, 100, 0, 100*time.Millisecond)
	feed(pub, t0, 100, 10, 100*time.Millisecond)
	s.Tick(t0)
	if pub.Level != Degraded {
		t.Fatalf("not degraded: %v", pub.Level)
	}
	return s, priv, pub
}

func TestSchedulerDoesNotFlap(t *testing.T) {
	s, _, pub := degradedSeedSet(t)
	now := t0.Add(DefaultHold)
	s.Tick(now)
	if pub.Level != Recovering {
		t.Fatal("not recovering")
	}
	// at the alert level while it ramps: the step waits
	feed(pub, now, 100, 0, 700*time.Millisecond)
	now = now.Add(3 * DefaultRampInterval)
	s.Tick(now)
	if pub.Weight != 10 {
		t.Fatalf("stepped at the alert level: %d", pub.Weight)
	}
	// over the threshold again: out for twice the hold
	feed(pub, now, 10, 10, 0)
	s.Tick(now)
	if pub.Level != Degraded {
		t.Fatalf("relapse: %v", pub.Level)
	}
	now = now.Add(DefaultHold + time.Second)
	s.Tick(now)
	if pub.Level != Degraded {
		t.Fatal("a relapse should hold it out longer")
	}
	now = now.Add(DefaultHold)
	s.Tick(now)
	if pub.Level != Recovering {
		t.Fatalf("after the doubled hold: %v", pub.Level)
	}
}

func TestSchedulerKeepsTheLastMember(t *testing.T) {
	s, priv, pub := seedSet()
	now := t0
	feed(priv, now, 100, 20, 100*time.Millisecond) // 20%
	feed(pub, now, 100, 10, 100*time.Millisecond)  // 10%
	ev := s.Tick(now)
	// the worse one goes out; the other stays, and the set panics
	if priv.Level != Degraded || pub.Level.out() || !pub.Sick {
		t.Fatalf("levels %v %v sick %v", priv.Level, pub.Level, pub.Sick)
	}
	if !slices.Contains(kinds(ev), EventKept) || !slices.Contains(kinds(ev), EventPanic) || !s.Panic {
		t.Fatalf("events %v", kinds(ev))
	}
	if priv.Weight != 60 || pub.Weight != 40 {
		t.Errorf("in panic every member serves by weight: %d/%d", priv.Weight, pub.Weight)
	}
	// the kept member gets well: the panic ends, the other stays out
	pub.Window.Reset()
	feed(pub, now, 100, 0, 100*time.Millisecond)
	ev = s.Tick(now.Add(time.Second))
	if !slices.Contains(kinds(ev), EventPanicOver) || priv.Weight != 0 || pub.Weight != 100 || pub.Sick {
		t.Fatalf("after the panic: %v %d/%d", kinds(ev), priv.Weight, pub.Weight)
	}

	// one member: never out
	p := Policy{ErrorRate: 0.05}.WithDefaults()
	only := &Member{Name: "only", Policy: p, Window: NewWindow(DefaultWindow), Base: 1}
	one := &Set{Members: []*Member{only}}
	one.Rebalance()
	feed(only, now, 50, 50, 0)
	one.Tick(now)
	if only.Level.out() || only.Weight != 1 {
		t.Errorf("the only member: %v at %d", only.Level, only.Weight)
	}
}

func TestSchedulerBreaksOnProbes(t *testing.T) {
	s, priv, pub := seedSet()
	now := t0
	pub.ProbeDown = true
	ev := s.Tick(now) // no traffic needed
	if pub.Level != Broken || !ev[0].Probes || pub.Weight != 0 || priv.Weight != 100 {
		t.Fatalf("break: %v %v %d", kinds(ev), pub.Level, pub.Weight)
	}
	// out while its probes fail, however long
	now = now.Add(time.Minute)
	s.Tick(now)
	if pub.Level != Broken {
		t.Fatal("back while its probes fail")
	}
	pub.ProbeDown = false
	now = now.Add(time.Second)
	s.Tick(now)
	if pub.Level != Broken {
		t.Fatal("back before the hold")
	}
	now = now.Add(DefaultHold)
	s.Tick(now)
	if pub.Level != Recovering || pub.Weight != 10 {
		t.Fatalf("after the hold: %v %d", pub.Level, pub.Weight)
	}

	// every request failing is a break too, without probes
	s, _, pub = seedSet()
	feed(pub, t0, 30, 30, 0)
	if ev := s.Tick(t0); ev[0].Kind != EventBreak || ev[0].Probes {
		t.Fatalf("%v", kinds(ev))
	}
}

func TestSchedulerNeedsVolume(t *testing.T) {
	s, _, pub := seedSet()
	feed(pub, t0, DefaultMinRequests-1, DefaultMinRequests-1, 0)
	if ev := s.Tick(t0); len(ev) != 0 || pub.Level != OK {
		t.Fatalf("acted on %d requests: %v", DefaultMinRequests-1, kinds(ev))
	}
}

func TestSchedulerCapsMembersOut(t *testing.T) {
	p := Policy{ErrorRate: 0.05}.WithDefaults()
	var ms []*Member
	for _, n := range []string{"a", "b", "c"} {
		ms = append(ms, &Member{Name: n, Policy: p, Window: NewWindow(DefaultWindow), Base: 10})
	}
	s := &Set{Members: ms, MaxOut: 1}
	s.Rebalance()
	feed(ms[0], t0, 50, 10, 0)
	feed(ms[1], t0, 50, 20, 0)
	feed(ms[2], t0, 50, 0, 0)
	s.Tick(t0)
	if ms[1].Level != Degraded || ms[0].Level.out() || !ms[0].Sick {
		t.Fatalf("levels %v %v", ms[0].Level, ms[1].Level)
	}
	if ms[0].Weight+ms[1].Weight+ms[2].Weight != 30 || ms[0].Weight != 15 || ms[2].Weight != 15 {
		t.Errorf("weights %d %d %d", ms[0].Weight, ms[1].Weight, ms[2].Weight)
	}
}

func TestLargestRemainder(t *testing.T) {
	for _, tc := range []struct {
		xs    []float64
		total int
		want  []int
	}{
		{[]float64{71.43, 28.57}, 100, []int{71, 29}},
		{[]float64{33.3, 33.3, 33.4}, 100, []int{33, 33, 34}},
		{[]float64{0, 0}, 0, []int{0, 0}},
		{[]float64{10, 0, 90}, 100, []int{10, 0, 90}},
	} {
		if got := largestRemainder(tc.xs, tc.total); !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func BenchmarkWindowAdd(b *testing.B) {
	w := NewWindow(DefaultWindow)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		w.Add(now, false, 350*time.Millisecond)
	}
}

// A member on its way back is the only one left in service: it serves at
// its whole weight rather than leave the set at 0.
func TestSchedulerNeverZeroesTheSet(t *testing.T) {
	p := Policy{ErrorRate: 0.05}.WithDefaults()
	a := &Member{Name: "a", Policy: p, Window: NewWindow(DefaultWindow), Base: 1}
	b := &Member{Name: "b", Policy: p, Window: NewWindow(DefaultWindow), Base: 1}
	s := &Set{Members: []*Member{a, b}}
	s.Rebalance()
	b.ProbeDown = true
	s.Tick(t0)
	b.ProbeDown = false
	now := t0.Add(time.Second)
	s.Tick(now)
	now = now.Add(DefaultHold)
	s.Tick(now)
	if b.Level != Recovering || b.Fine != 25 || a.Fine != 175 {
		t.Fatalf("b recovering: %v, fine weights %d/%d", b.Level, a.Fine, b.Fine)
	}
	feed(a, now, 30, 30, 0)
	s.Tick(now)
	// the set keeps its total weight, all of it on b
	if a.Level != Broken || a.Fine != 0 || b.Weight != 2 || b.Fine != 200 {
		t.Fatalf("a out, b alone: %v, a at %d, b at %d (%d)", a.Level, a.Fine, b.Weight, b.Fine)
	}
}

// A member ramping back steps only on evidence: a quarter of
// min_requests answered since its last step, within the thresholds. One
// still slow at its small weight does not step, and goes out again once
// its window holds enough to judge: it never ramps to full weight
// unjudged, and a single slow answer does not double its hold.
func TestSchedulerRampsOnlyOnEvidence(t *testing.T) {
	s, _, pub := degradedSeedSet(t)
	now := t0.Add(DefaultHold)
	s.Tick(now)
	if pub.Level != Recovering || pub.Weight != 10 {
		t.Fatalf("not recovering: %v at %d", pub.Level, pub.Weight)
	}
	// no traffic reached it: no step, however long
	for range 5 {
		now = now.Add(DefaultRampInterval)
		s.Tick(now)
	}
	if pub.Weight != 10 || pub.Level != Recovering {
		t.Fatalf("stepped without evidence: %v at %d", pub.Level, pub.Weight)
	}
	// four good answers are not enough; a fifth is
	feed(pub, now, 4, 0, 100*time.Millisecond)
	now = now.Add(DefaultRampInterval)
	s.Tick(now)
	if pub.Weight != 10 {
		t.Fatalf("stepped on 4 answers: %d", pub.Weight)
	}
	feed(pub, now, 1, 0, 100*time.Millisecond)
	s.Tick(now)
	if pub.Weight != 20 {
		t.Fatalf("5 good answers did not step: %d", pub.Weight)
	}
	// slow answers earn no step, and one alone sends it nowhere
	now = now.Add(DefaultRampInterval)
	feed(pub, now, 5, 0, 1200*time.Millisecond)
	s.Tick(now)
	if pub.Level != Recovering || pub.Weight != 20 {
		t.Fatalf("after 5 slow answers: %v at %d", pub.Level, pub.Weight)
	}
	// once its window holds min_requests, the slowness takes it out
	feed(pub, now, 10, 0, 1200*time.Millisecond)
	s.Tick(now)
	if pub.Level != Degraded || pub.Weight != 0 {
		t.Fatalf("still slow with a full window, yet %v at %d", pub.Level, pub.Weight)
	}
}

// A member carried into a new config keeps its level, hold and window:
// a degraded member stays out for the rest of its hold.
func TestCarryKeepsTheHold(t *testing.T) {
	_, priv, pub := degradedSeedSet(t)
	now := t0
	s2, priv2, pub2 := seedSet()
	priv2.Carry(priv)
	pub2.Carry(pub)
	s2.Rebalance()
	if pub2.Level != Degraded || pub2.Weight != 0 || priv2.Weight != 100 {
		t.Fatalf("carried: %v at %d/%d", pub2.Level, priv2.Weight, pub2.Weight)
	}
	if st := pub2.Window.Stats(now); st.Requests != 100 || st.Errors != 10 {
		t.Errorf("the window was not carried: %+v", st)
	}
	// a copy: the old member's window is its own still
	pub.Window.Add(now, true, 0)
	if st := pub2.Window.Stats(now); st.Errors != 10 {
		t.Errorf("the windows are shared: %+v", st)
	}
	s2.Tick(now.Add(DefaultHold - time.Second))
	if pub2.Level != Degraded {
		t.Errorf("out of its hold early: %v", pub2.Level)
	}
	s2.Tick(now.Add(DefaultHold))
	if pub2.Level != Recovering {
		t.Errorf("after its hold: %v", pub2.Level)
	}
}

func TestConfigPolicyChecksAndDefaults(t *testing.T) {
	p, err := (&Config{}).Policy()
	if err != nil || p.ErrorRate != 0.05 {
		t.Errorf("empty config: %+v, %v; want the 0.05 default error rate", p, err)
	}
	bad := 1.5
	if _, err := (&Config{ErrorRate: &bad}).Policy(); err == nil {
		t.Error("an error rate of 1.5 was taken")
	}
	set := &Config{Window: caddy.Duration(time.Minute), MinRequests: 5}
	own := &Config{MinRequests: 7}
	if u := set.Under(own); time.Duration(u.Window) != time.Minute || u.MinRequests != 7 || set.MinRequests != 5 {
		t.Errorf("Under: %+v (the set's %+v): want the set's window and the member's own min_requests, the set's config unchanged", u, set)
	}
	if (&Config{}).WindowLength() != DefaultWindow {
		t.Error("an unset window is not the default")
	}
}
