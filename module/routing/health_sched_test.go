// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
)

// schedulerLog is a set of clouds, as the multicloud example's, whose
// ticks return the scheduler's log lines.
func schedulerLog(maxOut int, bases ...int) (*SetHealth, []*healthscore.Member, func(at time.Duration) []string) {
	hs := &SetHealth{gateway: "default", alias: "chat-main", set: "clouds", weighted: new(WeightedSet)}
	hs.scores.MaxOut = maxOut
	p := healthscore.Policy{ErrorRate: 0.05, P99: 800 * time.Millisecond}.WithDefaults()
	var ms []*healthscore.Member
	for i, b := range bases {
		m := &healthscore.Member{Name: "cloud-" + string(rune('a'+i)), Policy: p, Window: healthscore.NewWindow(healthscore.DefaultWindow), Base: b}
		ms = append(ms, m)
	}
	hs.scores.Members = ms
	hs.scores.Rebalance()
	t0 := time.Unix(1_800_000_000, 0)
	return hs, ms, func(at time.Duration) []string {
		var out []string
		for _, l := range hs.Lines(hs.scores.Tick(t0.Add(at)), nil) {
			out = append(out, l.msg)
		}
		return out
	}
}

// Both weighted clouds fail their health checks, one tick apart, then the
// second passes again: every line is true when it is logged. The second is
// kept for its failing checks (not for numbers that show nothing wrong),
// the panic gives the first its weight back without calling that a break,
// and "route recovered" comes once the member carrying the traffic is
// well again, not before.
func TestSchedulerLogsTheTruthWhenEveryCloudFailsItsChecks(t *testing.T) {
	_, m, tick := schedulerLog(0, 60, 40)
	a, b := m[0], m[1]
	want := func(step string, got []string, lines ...string) {
		t.Helper()
		if !slices.Equal(got, lines) {
			t.Errorf("%s: the scheduler logged\n  %s\nwant\n  %s", step, strings.Join(got, "\n  "), strings.Join(lines, "\n  "))
		}
	}
	a.ProbeDown = true
	want("cloud-a's checks fail", tick(0),
		"route[cloud-a] broken: its health checks fail",
		"scheduler break: weight cloud-a 60 -> 0",
		"scheduler promote: weight cloud-b 40 -> 100",
		"route recovered, traffic fully on cloud-b")
	b.ProbeDown = true
	want("cloud-b's checks fail too", tick(250*time.Millisecond),
		"route[cloud-b] broken: its health checks fail: kept in service, the last member in service",
		"scheduler panic: every member of set clouds is sick; traffic goes to all by weight",
		"scheduler restore: weight cloud-a 0 -> 60",
		"scheduler demote: weight cloud-b 100 -> 40")
	want("both still failing", tick(500*time.Millisecond))
	b.ProbeDown = false
	want("cloud-b's checks pass again", tick(750*time.Millisecond),
		"scheduler panic over: set clouds has a healthy member again",
		"scheduler break: weight cloud-a 60 -> 0",
		"scheduler promote: weight cloud-b 40 -> 100",
		"route recovered, traffic fully on cloud-b")
}

// With three clouds and at most one out, a second failing cloud is kept
// by the cap: the line says so, and the route is not "recovered" while a
// cloud that carries traffic is kept sick.
func TestSchedulerDoesNotCallARouteWithASickMemberRecovered(t *testing.T) {
	_, m, tick := schedulerLog(1, 50, 30, 20)
	a, b := m[0], m[1]
	a.ProbeDown, b.ProbeDown = true, true
	a.Inflight = 1
	got := tick(0)
	if !slices.Contains(got, "route[cloud-b] broken: its health checks fail: kept in service, the most the set may take out are out (max_degraded)") {
		t.Errorf("the member kept by the cap: %q", got)
	}
	a.Inflight = 0
	for _, l := range tick(250 * time.Millisecond) {
		if strings.HasPrefix(l, "route recovered") {
			t.Errorf("with cloud-b kept in service sick: %q", l)
		}
	}
	b.ProbeDown = false
	if got := tick(500 * time.Millisecond); !slices.Contains(got, "route recovered, traffic fully on cloud-b, cloud-c") {
		t.Errorf("cloud-b well again: %q", got)
	}
}
