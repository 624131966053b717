// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package overflow

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func nan() float64 { return math.NaN() }

func TestOverflowHysteresis(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(core)
	oc := &Config{Waiting: &Threshold{Trigger: 8, Recover: 2}, Dwell: caddy.Duration(10 * time.Second)}
	st := new(State)
	t0 := time.Unix(1000, 0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	waiting := func(w float64) Signals { return Signals{Waiting: w, TTFTP99: nan(), KV: nan()} }

	// inside the dead band from below: nothing happens
	for i, w := range []float64{0, 3, 7, 5, 7.9, 2, 6} {
		if on, _ := oc.Evaluate(st, waiting(w), at(float64(i)), logger, "self"); on {
			t.Fatalf("overflow at waiting=%v", w)
		}
	}
	// the spike: on once
	if on, sig := oc.Evaluate(st, waiting(12), at(10), logger, "self"); !on || sig != "waiting" {
		t.Fatalf("no overflow at 12: %v %q", on, sig)
	}
	// it falls into the dead band and below recover within the dwell:
	// the state holds
	for i, w := range []float64{6, 3, 1, 0} {
		if on, _ := oc.Evaluate(st, waiting(w), at(11+float64(i)), logger, "self"); !on {
			t.Fatalf("left overflow during the dwell at waiting=%v", w)
		}
	}
	// after the dwell, in the dead band: still on (recovery needs <= 2)
	if on, _ := oc.Evaluate(st, waiting(5), at(25), logger, "self"); !on {
		t.Fatal("left overflow inside the dead band")
	}
	// unknown metrics do not count as recovered
	if on, _ := oc.Evaluate(st, waiting(nan()), at(26), logger, "self"); !on {
		t.Fatal("left overflow on unknown metrics")
	}
	// recover: off once
	if on, _ := oc.Evaluate(st, waiting(2), at(27), logger, "self"); on {
		t.Fatal("no recovery at waiting=2")
	}
	// dead band from below again, and a new spike within the dwell
	for i, w := range []float64{4, 7, 9, 15} {
		if on, _ := oc.Evaluate(st, waiting(w), at(28+float64(i)), logger, "self"); on {
			t.Fatalf("re-entered overflow during the dwell at waiting=%v", w)
		}
	}
	if on, _ := oc.Evaluate(st, waiting(9), at(37.5), logger, "self"); !on {
		t.Fatal("no overflow after the dwell")
	}

	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	want := []string{
		"overflow on: group=self waiting=12 > 8",
		"overflow off: group=self waiting=2 <= 2",
		"overflow on: group=self waiting=9 > 8",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("transitions logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.changes.Load() != 3 {
		t.Errorf("%d transitions counted", st.changes.Load())
	}
}

func TestOverflowAnySignalTriggersAllMustRecover(t *testing.T) {
	oc := &Config{
		Waiting:  &Threshold{Trigger: 8, Recover: 2},
		TTFTP99:  &Threshold{Trigger: 2, Recover: 0.8},
		InFlight: &Threshold{Trigger: 60, Recover: 40},
		Dwell:    caddy.Duration(time.Nanosecond),
	}
	st := new(State)
	t0 := time.Unix(1000, 0)
	if on, sig := oc.Evaluate(st, Signals{Waiting: 0, TTFTP99: 2.5, KV: nan(), InFlight: 10}, t0, zap.NewNop(), "self"); !on || sig != "ttft_p99" {
		t.Fatalf("ttft trigger: %v %q", on, sig)
	}
	// waiting recovered, ttft did not
	if on, _ := oc.Evaluate(st, Signals{Waiting: 0, TTFTP99: 1.0, KV: nan(), InFlight: 10}, t0.Add(time.Second), zap.NewNop(), "self"); !on {
		t.Fatal("recovered with ttft_p99 above its recover level")
	}
	if on, _ := oc.Evaluate(st, Signals{Waiting: 0, TTFTP99: 0.5, KV: nan(), InFlight: 10}, t0.Add(2*time.Second), zap.NewNop(), "self"); on {
		t.Fatal("no recovery with all signals low")
	}
	if on, sig := oc.Evaluate(st, Signals{Waiting: nan(), TTFTP99: nan(), KV: nan(), InFlight: 60}, t0.Add(3*time.Second), zap.NewNop(), "self"); !on || sig != "inflight" {
		t.Fatalf("in-flight trigger without metrics: %v %q", on, sig)
	}
}

// Overflow keeps requests away from the group, so its TTFT window goes
// quiet: fresh metrics with no TTFT observed must let it recover, while
// stale metrics still hold it.
func TestOverflowRecoversWhenTheGroupIsQuiet(t *testing.T) {
	oc := &Config{
		Waiting: &Threshold{Trigger: 8, Recover: 2},
		TTFTP99: &Threshold{Trigger: 2, Recover: 0.8},
		Dwell:   caddy.Duration(time.Second),
	}
	st := new(State)
	t0 := time.Unix(1000, 0)
	if on, _ := oc.Evaluate(st, Signals{Waiting: 3, TTFTP99: 4, KV: nan(), Fresh: true}, t0, zap.NewNop(), "self"); !on {
		t.Fatal("no overflow at ttft_p99=4")
	}
	stale := Signals{Waiting: nan(), TTFTP99: nan(), KV: nan()}
	if on, _ := oc.Evaluate(st, stale, t0.Add(5*time.Second), zap.NewNop(), "self"); !on {
		t.Fatal("recovered on stale metrics")
	}
	queued := Signals{Waiting: 5, TTFTP99: nan(), KV: nan(), Fresh: true}
	if on, _ := oc.Evaluate(st, queued, t0.Add(6*time.Second), zap.NewNop(), "self"); !on {
		t.Fatal("recovered with requests still queued")
	}
	quiet := Signals{Waiting: 0, TTFTP99: nan(), KV: nan(), Fresh: true}
	if on, _ := oc.Evaluate(st, quiet, t0.Add(7*time.Second), zap.NewNop(), "self"); on {
		t.Fatal("held overflow on a quiet TTFT window")
	}
}

func TestOverflowConfigValidate(t *testing.T) {
	for _, oc := range []*Config{
		{},
		{Waiting: &Threshold{Trigger: 2, Recover: 2}},
		{Waiting: &Threshold{Trigger: 0, Recover: 0}},
		{KVCacheUsage: &Threshold{Trigger: 0.9, Recover: -1}},
	} {
		if err := oc.Validate(); err == nil {
			t.Errorf("%+v accepted", oc)
		}
	}
	if err := (&Config{KVCacheUsage: &Threshold{Trigger: 0.95, Recover: 0.8}}).Validate(); err != nil {
		t.Error(err)
	}
}

// The overflow check runs on every request to a group with overflow; in
// the steady state (no transition) it allocates nothing.
func TestOverflowEvaluateDoesNotAllocate(t *testing.T) {
	oc := &Config{Waiting: &Threshold{Trigger: 8, Recover: 2}, InFlight: &Threshold{Trigger: 10, Recover: 2}}
	st, logger, t0 := new(State), zap.NewNop(), time.Unix(1_800_000_000, 0)
	for _, waiting := range []float64{1, 10} { // off, then on
		oc.Evaluate(st, Signals{Waiting: waiting}, t0, logger, "self")
		if n := testing.AllocsPerRun(100, func() { oc.Evaluate(st, Signals{Waiting: waiting}, t0, logger, "self") }); n != 0 {
			t.Errorf("waiting=%v: %v allocations per request", waiting, n)
		}
	}
}

// In JSON, ttft_p99's levels are durations as Caddy writes them, or
// seconds; a duration for a count is refused, as is an unknown field.
func TestThresholdJSON(t *testing.T) {
	var oc Config
	if err := json.Unmarshal([]byte(`{"ttft_p99": {"trigger": "2s", "recover": "800ms"}, "waiting": {"trigger": 8, "recover": 2}}`), &oc); err != nil {
		t.Fatal(err)
	}
	if oc.TTFTP99.Trigger != 2 || oc.TTFTP99.Recover != 0.8 || oc.Waiting.Trigger != 8 || oc.Validate() != nil {
		t.Errorf("ttft_p99 %+v, waiting %+v, %v", oc.TTFTP99, oc.Waiting, oc.Validate())
	}
	for body, want := range map[string]string{
		`{"waiting": {"trigger": "2s", "recover": "1s"}}`: "overflow waiting: a count or a share, not a duration",
		`{"ttft_p99": {"trigger": "soon", "recover": 0}}`: `trigger: "soon" is neither a number nor a duration`,
		`{"ttft_p99": {"trigger": 2, "recovr": 1}}`:       `unknown field "recovr"`,
	} {
		var oc Config
		err := json.Unmarshal([]byte(body), &oc)
		if err == nil {
			err = oc.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// WouldOverflow says what Evaluate would, and changes nothing.
func TestWouldOverflowAgreesWithEvaluate(t *testing.T) {
	oc := &Config{Waiting: &Threshold{Trigger: 8, Recover: 2}, Dwell: 10_000_000_000}
	st := new(State)
	t0 := time.Unix(1000, 0)
	for i, w := range []float64{0, 7, 12, 6, 1, 0, 5, nan(), 2, 9, 15, 9, 9, 1} {
		at := t0.Add(time.Duration(i) * 3 * time.Second)
		s := Signals{Waiting: w, TTFTP99: nan(), KV: nan()}
		active, since, changes := st.active.Load(), st.since, st.changes.Load()
		would := oc.WouldOverflow(st, s, at)
		if st.active.Load() != active || st.since != since || st.changes.Load() != changes {
			t.Fatalf("step %d: WouldOverflow changed the state", i)
		}
		if on, _ := oc.Evaluate(st, s, at, zap.NewNop(), "self"); on != would {
			t.Fatalf("step %d (waiting=%v): WouldOverflow %v, evaluate %v", i, w, would, on)
		}
	}
	if st.changes.Load() < 3 {
		t.Fatalf("the sequence made %d transitions, want at least 3", st.changes.Load())
	}
}
