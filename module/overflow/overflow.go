// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package overflow is the controller that sends a vLLM group's new
// requests elsewhere while the group is loaded: any signal at or above
// its trigger turns it on, all at or below their recover level turn it
// off, each state held for a dwell (hysteresis, so that traffic does not
// flap). It is a leaf: it reads the signals it is given, at the time it
// is given, and imports nothing of the product.
package overflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// Config makes a vLLM group overflow: while any signal is at or
// above its trigger, new requests skip the group (requests in flight
// finish); the group takes requests again once every signal is at or
// below its recover threshold. The gap between the two is the dead band,
// and each state is held for at least dwell, so that traffic does not
// flap between self-hosted and cloud.
type Config struct {
	// Requests waiting in vLLM's queues, summed over the endpoints.
	Waiting *Threshold `json:"waiting,omitempty"`

	// Time to first token p99 over the probes' TTFT window, in
	// seconds, the worst endpoint's.
	TTFTP99 *Threshold `json:"ttft_p99,omitempty"`

	// KV-cache usage (0..1), the fullest endpoint's.
	KVCacheUsage *Threshold `json:"kv_cache_usage,omitempty"`

	// This Caddy's requests in flight to the group's endpoints (every
	// gateway's, mirror copies included; not other replicas'): the
	// instant signal, while vLLM's gauges lag.
	InFlight *Threshold `json:"inflight,omitempty"`

	// The shortest time a state is held once entered. Default: 10s.
	Dwell caddy.Duration `json:"dwell,omitempty"`
}

// Threshold is a trigger and a lower recover level.
type Threshold struct {
	Trigger float64 `json:"trigger"`
	Recover float64 `json:"recover"`

	durations bool // written as duration strings ("2s"), in JSON
}

// UnmarshalJSON reads a threshold whose levels are numbers, or, for
// ttft_p99, durations as Caddy writes them ("2s", "800ms"), as the
// Caddyfile takes them.
func (th *Threshold) UnmarshalJSON(b []byte) error {
	var raw struct {
		Trigger json.RawMessage `json:"trigger"`
		Recover json.RawMessage `json:"recover"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	level := func(name string, v json.RawMessage) (float64, error) {
		if len(v) == 0 {
			return 0, nil
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			d, err := caddy.ParseDuration(s)
			if err != nil {
				return 0, fmt.Errorf("%s: %q is neither a number nor a duration", name, s)
			}
			th.durations = true
			return d.Seconds(), nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return 0, fmt.Errorf("%s: want a number or a duration string, got %s", name, v)
		}
		return f, nil
	}
	var err error
	if th.Trigger, err = level("trigger", raw.Trigger); err != nil {
		return err
	}
	th.Recover, err = level("recover", raw.Recover)
	return err
}

const defaultDwell = 10 * time.Second

// State is the controller's state of one group; the gateway keeps it
// across reloads.
type State struct {
	mu      sync.Mutex
	active  atomic.Bool
	since   time.Time
	reason  string // the signal that triggered, e.g. "waiting=12 > 8"
	signal  string // its name, for headers and metrics
	changes atomic.Int64
}

// Signals are the overflow inputs of a group at one moment; NaN is
// unknown: no fresh metrics, or fresh metrics without the signal.
type Signals struct {
	// requests waiting in vLLM's queues, summed over the endpoints; time
	// to first token p99, in seconds, and KV-cache usage (0..1), the
	// worst endpoint's; the requests in flight from this Caddy
	Waiting, TTFTP99, KV, InFlight float64

	Fresh bool // some endpoint's metrics are fresh
}

type signalDef struct {
	name string
	th   *Threshold
	get  func(Signals) float64
	unit string
}

// defs returns the Signals in a fixed order; an array, so that the
// evaluation on every request does not allocate.
func (oc *Config) defs() [4]signalDef {
	return [4]signalDef{
		{"waiting", oc.Waiting, func(s Signals) float64 { return s.Waiting }, ""},
		{"ttft_p99", oc.TTFTP99, func(s Signals) float64 { return s.TTFTP99 }, "s"},
		{"kv_cache_usage", oc.KVCacheUsage, func(s Signals) float64 { return s.KV }, ""},
		{"inflight", oc.InFlight, func(s Signals) float64 { return s.InFlight }, ""},
	}
}

// Validate reports what is wrong with the config, if anything.
func (oc *Config) Validate() error {
	any := false
	for _, d := range oc.defs() {
		if d.th == nil {
			continue
		}
		any = true
		if d.th.durations && d.name != "ttft_p99" {
			return fmt.Errorf("overflow %s: a count or a share, not a duration", d.name)
		}
		if d.th.Trigger <= 0 || d.th.Recover < 0 || d.th.Recover >= d.th.Trigger ||
			math.IsNaN(d.th.Trigger) || math.IsNaN(d.th.Recover) {
			return fmt.Errorf("overflow %s: want a positive trigger above a non-negative recover level, got %v and %v",
				d.name, d.th.Trigger, d.th.Recover)
		}
	}
	if !any {
		return fmt.Errorf("overflow needs at least one signal (waiting, ttft_p99, kv_cache_usage, inflight)")
	}
	if oc.Dwell < 0 {
		return fmt.Errorf("overflow dwell must not be negative")
	}
	return nil
}

func (oc *Config) dwell() time.Duration {
	if oc.Dwell == 0 {
		return defaultDwell
	}
	return time.Duration(oc.Dwell)
}

// Evaluate updates the state from the Signals at time t and reports
// whether the group is in overflow, with the triggering signal's name. A
// transition is logged once, with the values that caused it.
func (oc *Config) Evaluate(st *State, s Signals, t time.Time, logger *zap.Logger, group string) (bool, string) {
	active := st.active.Load()
	// cheap path: does the state want to change at all?
	want, cause := oc.wants(active, s)
	if want == active {
		return active, st.signalName()
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.active.Load() != active {
		return st.active.Load(), st.signal // another request made the change
	}
	if !st.since.IsZero() && t.Sub(st.since) < oc.dwell() {
		return active, st.signal // dwell: hold the state
	}
	st.since = t
	st.changes.Add(1)
	if want {
		d := oc.def(cause)
		st.reason = fmt.Sprintf("%s=%s > %s", cause, fmtSignal(d.get(s), d.unit), fmtSignal(d.th.Trigger, d.unit))
		st.signal = cause
		st.active.Store(true)
		logger.Warn("overflow on: group=" + group + " " + st.reason)
		return true, cause
	}
	var parts []string
	for _, d := range oc.defs() {
		if d.th != nil {
			parts = append(parts, fmt.Sprintf("%s=%s <= %s", d.name, fmtSignal(d.get(s), d.unit), fmtSignal(d.th.Recover, d.unit)))
		}
	}
	st.reason = strings.Join(parts, " ")
	st.signal = ""
	st.active.Store(false)
	logger.Info("overflow off: group=" + group + " " + st.reason)
	return false, ""
}

// wants returns the state the Signals ask for, from the state active,
// and the signal that asks for overflow.
func (oc *Config) wants(active bool, s Signals) (want bool, cause string) {
	if !active {
		for _, d := range oc.defs() {
			if d.th == nil {
				continue
			}
			if v := d.get(s); !math.IsNaN(v) && v >= d.th.Trigger {
				return true, d.name
			}
		}
		return false, ""
	}
	for _, d := range oc.defs() {
		if d.th == nil {
			continue
		}
		v := d.get(s)
		if math.IsNaN(v) && s.Fresh {
			// fresh metrics without the signal are no evidence of
			// load: no TTFT observed while overflow keeps requests
			// away, or a gauge this vLLM does not export; holding
			// the state on them would hold it for good
			continue
		}
		if math.IsNaN(v) || v > d.th.Recover {
			// stale metrics keep the state: recovery needs evidence
			return true, ""
		}
	}
	return false, ""
}

// WouldOverflow reports whether Evaluate would find the group in
// overflow at time t, without changing the state (no transition, no
// dwell started, nothing logged): for a target judged before its turn.
func (oc *Config) WouldOverflow(st *State, s Signals, t time.Time) bool {
	active := st.active.Load()
	if want, _ := oc.wants(active, s); want == active {
		return active
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur := st.active.Load(); cur != active {
		return cur // another request made the change
	}
	if !st.since.IsZero() && t.Sub(st.since) < oc.dwell() {
		return active // dwell: the state holds
	}
	return !active
}

// View is the state as it stands: whether the group overflows, since
// when, why (the signal that triggered and its value, or the values it
// recovered at) and how many transitions it made.
func (st *State) View() (active bool, since time.Time, reason string, transitions int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.active.Load(), st.since, st.reason, st.changes.Load()
}

func (st *State) signalName() string {
	if !st.active.Load() {
		return ""
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.signal
}

func (oc *Config) def(name string) signalDef {
	for _, d := range oc.defs() {
		if d.name == name {
			return d
		}
	}
	return signalDef{}
}

func fmtSignal(v float64, unit string) string {
	if math.IsNaN(v) {
		return "none"
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + unit
}
