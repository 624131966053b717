// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

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
	oc := &OverflowConfig{Waiting: &Threshold{Trigger: 8, Recover: 2}, Dwell: caddy.Duration(10 * time.Second)}
	st := new(overflowState)
	t0 := time.Unix(1000, 0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	waiting := func(w float64) signals { return signals{waiting: w, ttftP99: nan(), kv: nan()} }

	// inside the dead band from below: nothing happens
	for i, w := range []float64{0, 3, 7, 5, 7.9, 2, 6} {
		if on, _ := oc.evaluate(st, waiting(w), at(float64(i)), logger, "self"); on {
			t.Fatalf("overflow at waiting=%v", w)
		}
	}
	// the spike: on once
	if on, sig := oc.evaluate(st, waiting(12), at(10), logger, "self"); !on || sig != "waiting" {
		t.Fatalf("no overflow at 12: %v %q", on, sig)
	}
	// it falls into the dead band and below recover within the dwell:
	// the state holds
	for i, w := range []float64{6, 3, 1, 0} {
		if on, _ := oc.evaluate(st, waiting(w), at(11+float64(i)), logger, "self"); !on {
			t.Fatalf("left overflow during the dwell at waiting=%v", w)
		}
	}
	// after the dwell, in the dead band: still on (recovery needs <= 2)
	if on, _ := oc.evaluate(st, waiting(5), at(25), logger, "self"); !on {
		t.Fatal("left overflow inside the dead band")
	}
	// unknown metrics do not count as recovered
	if on, _ := oc.evaluate(st, waiting(nan()), at(26), logger, "self"); !on {
		t.Fatal("left overflow on unknown metrics")
	}
	// recover: off once
	if on, _ := oc.evaluate(st, waiting(2), at(27), logger, "self"); on {
		t.Fatal("no recovery at waiting=2")
	}
	// dead band from below again, and a new spike within the dwell
	for i, w := range []float64{4, 7, 9, 15} {
		if on, _ := oc.evaluate(st, waiting(w), at(28+float64(i)), logger, "self"); on {
			t.Fatalf("re-entered overflow during the dwell at waiting=%v", w)
		}
	}
	if on, _ := oc.evaluate(st, waiting(9), at(37.5), logger, "self"); !on {
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
	oc := &OverflowConfig{
		Waiting:  &Threshold{Trigger: 8, Recover: 2},
		TTFTP99:  &Threshold{Trigger: 2, Recover: 0.8},
		InFlight: &Threshold{Trigger: 60, Recover: 40},
		Dwell:    caddy.Duration(time.Nanosecond),
	}
	st := new(overflowState)
	t0 := time.Unix(1000, 0)
	if on, sig := oc.evaluate(st, signals{waiting: 0, ttftP99: 2.5, kv: nan(), inflight: 10}, t0, zap.NewNop(), "self"); !on || sig != "ttft_p99" {
		t.Fatalf("ttft trigger: %v %q", on, sig)
	}
	// waiting recovered, ttft did not
	if on, _ := oc.evaluate(st, signals{waiting: 0, ttftP99: 1.0, kv: nan(), inflight: 10}, t0.Add(time.Second), zap.NewNop(), "self"); !on {
		t.Fatal("recovered with ttft_p99 above its recover level")
	}
	if on, _ := oc.evaluate(st, signals{waiting: 0, ttftP99: 0.5, kv: nan(), inflight: 10}, t0.Add(2*time.Second), zap.NewNop(), "self"); on {
		t.Fatal("no recovery with all signals low")
	}
	if on, sig := oc.evaluate(st, signals{waiting: nan(), ttftP99: nan(), kv: nan(), inflight: 60}, t0.Add(3*time.Second), zap.NewNop(), "self"); !on || sig != "inflight" {
		t.Fatalf("in-flight trigger without metrics: %v %q", on, sig)
	}
}

// Overflow keeps requests away from the group, so its TTFT window goes
// quiet: fresh metrics with no TTFT observed must let it recover, while
// stale metrics still hold it.
func TestOverflowRecoversWhenTheGroupIsQuiet(t *testing.T) {
	oc := &OverflowConfig{
		Waiting: &Threshold{Trigger: 8, Recover: 2},
		TTFTP99: &Threshold{Trigger: 2, Recover: 0.8},
		Dwell:   caddy.Duration(time.Second),
	}
	st := new(overflowState)
	t0 := time.Unix(1000, 0)
	if on, _ := oc.evaluate(st, signals{waiting: 3, ttftP99: 4, kv: nan(), fresh: true}, t0, zap.NewNop(), "self"); !on {
		t.Fatal("no overflow at ttft_p99=4")
	}
	stale := signals{waiting: nan(), ttftP99: nan(), kv: nan()}
	if on, _ := oc.evaluate(st, stale, t0.Add(5*time.Second), zap.NewNop(), "self"); !on {
		t.Fatal("recovered on stale metrics")
	}
	queued := signals{waiting: 5, ttftP99: nan(), kv: nan(), fresh: true}
	if on, _ := oc.evaluate(st, queued, t0.Add(6*time.Second), zap.NewNop(), "self"); !on {
		t.Fatal("recovered with requests still queued")
	}
	quiet := signals{waiting: 0, ttftP99: nan(), kv: nan(), fresh: true}
	if on, _ := oc.evaluate(st, quiet, t0.Add(7*time.Second), zap.NewNop(), "self"); on {
		t.Fatal("held overflow on a quiet TTFT window")
	}
}

func TestOverflowConfigValidate(t *testing.T) {
	for _, oc := range []*OverflowConfig{
		{},
		{Waiting: &Threshold{Trigger: 2, Recover: 2}},
		{Waiting: &Threshold{Trigger: 0, Recover: 0}},
		{KVCacheUsage: &Threshold{Trigger: 0.9, Recover: -1}},
	} {
		if err := oc.validate(); err == nil {
			t.Errorf("%+v accepted", oc)
		}
	}
	if err := (&OverflowConfig{KVCacheUsage: &Threshold{Trigger: 0.95, Recover: 0.8}}).validate(); err != nil {
		t.Error(err)
	}
}

// The overflow check runs on every request to a group with overflow; in
// the steady state (no transition) it allocates nothing.
func TestOverflowEvaluateDoesNotAllocate(t *testing.T) {
	oc := &OverflowConfig{Waiting: &Threshold{Trigger: 8, Recover: 2}, InFlight: &Threshold{Trigger: 10, Recover: 2}}
	st, logger, t0 := new(overflowState), zap.NewNop(), time.Unix(1_800_000_000, 0)
	for _, waiting := range []float64{1, 10} { // off, then on
		oc.evaluate(st, signals{waiting: waiting}, t0, logger, "self")
		if n := testing.AllocsPerRun(100, func() { oc.evaluate(st, signals{waiting: waiting}, t0, logger, "self") }); n != 0 {
			t.Errorf("waiting=%v: %v allocations per request", waiting, n)
		}
	}
}

// In JSON, ttft_p99's levels are durations as Caddy writes them, or
// seconds; a duration for a count is refused, as is an unknown field.
func TestThresholdJSON(t *testing.T) {
	var oc OverflowConfig
	if err := json.Unmarshal([]byte(`{"ttft_p99": {"trigger": "2s", "recover": "800ms"}, "waiting": {"trigger": 8, "recover": 2}}`), &oc); err != nil {
		t.Fatal(err)
	}
	if oc.TTFTP99.Trigger != 2 || oc.TTFTP99.Recover != 0.8 || oc.Waiting.Trigger != 8 || oc.validate() != nil {
		t.Errorf("ttft_p99 %+v, waiting %+v, %v", oc.TTFTP99, oc.Waiting, oc.validate())
	}
	for body, want := range map[string]string{
		`{"waiting": {"trigger": "2s", "recover": "1s"}}`: "overflow waiting: a count or a share, not a duration",
		`{"ttft_p99": {"trigger": "soon", "recover": 0}}`: `trigger: "soon" is neither a number nor a duration`,
		`{"ttft_p99": {"trigger": 2, "recovr": 1}}`:       `unknown field "recovr"`,
	} {
		var oc OverflowConfig
		err := json.Unmarshal([]byte(body), &oc)
		if err == nil {
			err = oc.validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
