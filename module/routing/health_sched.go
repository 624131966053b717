// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

// HealthConfig is health-score scheduling (see healthscore.Config).
type HealthConfig = healthscore.Config

// healthTick is how often the scheduler evaluates its sets: the time
// from a threshold crossed to the weight moved is at most this.
const healthTick = 250 * time.Millisecond

// SetHealth is the scheduler of one weighted set whose members have a
// health config, or of the endpoints of a vllm group with one.
type SetHealth struct {
	gateway, alias, set string
	weighted            *WeightedSet // the set's; nil for a group's endpoints
	group               string       // the group, for a group's endpoints
	logger              *zap.Logger
	clock               clock.Clock // of the members' windows

	mu      sync.Mutex
	scores  healthscore.Set
	members []*HealthMember
	stopped atomic.Bool // its config stopped
}

// HealthMember is one member's window and in-flight count: a target of a
// weighted set, or an endpoint of a vllm group.
type HealthMember struct {
	set      *SetHealth
	score    *healthscore.Member
	target   *Target
	endpoint *upstream.Endpoint
	inflight atomic.Int64
	key      string        // across configs (see Carry)
	slot     *carrySlot    // its place under key, while it holds it
	prev     *HealthMember // the member it took the place of
}

// what names the set in log lines.
func (hs *SetHealth) what() string {
	if hs.weighted == nil {
		return "the endpoints of group " + hs.group
	}
	return "set " + hs.set
}

var SchedulerTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: metricsNS, Name: "scheduler_transitions_total",
	Help: "Health levels members of weighted sets entered (alert, degraded, broken, recovering, ok), by alias and group.",
}, []string{"gateway", "alias", "group", "level"})

// provisionHealth sets up the scheduler of a set whose members have a
// health config; a set without one costs nothing.
func provisionHealth(gw string, c clock.Clock, logger *zap.Logger, al *Alias, ws *WeightedSet) error {
	members := al.Targets[ws.Start:ws.End]
	watched := false
	for _, t := range members {
		watched = watched || t.Health != nil
	}
	if !watched {
		return nil
	}
	hs := &SetHealth{gateway: gw, alias: al.Name, set: ws.Name, weighted: ws, logger: logger, clock: c}
	for _, t := range members {
		if t.Health != nil {
			hs.scores.MaxOut = max(hs.scores.MaxOut, t.Health.MaxDegraded)
		}
	}
	// every policy checked before any member takes over from the running
	// config's (see Carry)
	policies := make([]healthscore.Policy, len(members))
	for i, t := range members {
		hc := t.Health
		if hc == nil {
			hc = new(HealthConfig) // the defaults: every member of a set is watched alike
		}
		p, err := hc.Policy()
		if err != nil {
			return fmt.Errorf("set %q: target %q: %v", ws.Name, t.Group, err)
		}
		policies[i] = p
	}
	for i, t := range members {
		hc := t.Health
		if hc == nil {
			hc = new(HealthConfig)
		}
		m := &healthscore.Member{Name: memberName(members, i), Policy: policies[i],
			Window: healthscore.NewWindow(hc.WindowLength()), Base: ws.base[i], Since: c.Now()}
		hm := &HealthMember{set: hs, score: m, target: t}
		hm.Carry(memberKey(gw, al.Name, ws.Name, t))
		hs.scores.Members = append(hs.scores.Members, m)
		hs.members = append(hs.members, hm)
		t.Seen.Health = hm
	}
	hs.scores.Rebalance()
	hs.Apply()
	ws.health = hs
	return nil
}

// memberName names a member in logs: its group, and its model when
// another member shares the group.
func memberName(members []*Target, i int) string {
	for j, o := range members {
		if j != i && o.Group == members[i].Group {
			return members[i].Group + "/" + members[i].Model
		}
	}
	return members[i].Group
}

// record counts an attempt that ended: failed, or answered after latency.
func (hm *HealthMember) record(failed bool, latency time.Duration) {
	hs := hm.set
	hs.mu.Lock()
	hm.score.Record(hs.clock.Now(), failed, latency)
	hs.mu.Unlock()
}

// setBase changes a member's weight as served when healthy (by hand),
// and moves the set's weights.
func (hs *SetHealth) setBase(i, w int) {
	hs.mu.Lock()
	hs.scores.Members[i].Base = w
	lines := hs.Lines(hs.scores.Rebalance(), hs.scores.Members[i])
	hs.Apply()
	hs.mu.Unlock()
	hs.write(lines)
}

// Apply hands the members' weights to the set's round robin, if they
// changed (a new rotation starts).
func (hs *SetHealth) Apply() {
	if hs.weighted == nil {
		for i, hm := range hs.members {
			hm.endpoint.Score.Fine.Store(int64(hs.scores.Members[i].Fine))
		}
		return
	}
	w := make([]int, len(hs.scores.Members))
	same := true
	for i, m := range hs.scores.Members {
		w[i] = hs.weighted.leaned(i, m.Fine)
		same = same && hs.weighted.Rotation.Weight(i) == w[i]
	}
	if !same {
		hs.weighted.Rotation.setAll(w)
	}
}

// Keep evaluates the gateway's sets until the config stops.
func (s *Schedule) Keep(ctx context.Context, c clock.Clock, logger *zap.Logger) {
	loop.Loop{Name: "health scheduler", Every: healthTick, Logger: logger}.Go(ctx, nil, func(context.Context) {
		t := c.Now()
		for _, dt := range s.triggers {
			dt.observe(t, logger)
		}
		for _, al := range s.chained {
			al.Chain.tick(t, logger, al.Name)
		}
		for _, ws := range s.strategySets {
			ws.relean(t)
		}
		for _, hs := range s.HealthSets {
			hs.tick(t)
		}
	})
}

// Schedule is what the gateway's scheduler ticks: the degradation
// triggers, the chains' caps, the sets leaning by latency and the
// health-scored sets and groups.
type Schedule struct {
	triggers     []*DegradeTrigger
	chained      []*Alias // aliases with a degradation chain
	strategySets []*WeightedSet
	HealthSets   []*SetHealth
}

// AddAlias schedules what the provisioned alias needs ticked.
func (s *Schedule) AddAlias(al *Alias) {
	for _, ws := range al.WeightedSets {
		if ws.Strategy == StrategyLatency {
			s.strategySets = append(s.strategySets, ws)
		}
		if ws.health != nil {
			s.HealthSets = append(s.HealthSets, ws.health)
		}
	}
	if c := al.Chain; c != nil {
		s.chained = append(s.chained, al)
		s.triggers = append(s.triggers, c.triggers...)
	}
}

// Empty reports whether there is nothing to tick.
func (s *Schedule) Empty() bool {
	return len(s.HealthSets) == 0 && len(s.strategySets) == 0 && len(s.chained) == 0
}

// tick evaluates the set: probes, windows, levels, weights.
func (hs *SetHealth) tick(t time.Time) {
	hs.mu.Lock()
	before := make([]healthscore.Level, len(hs.members))
	for i, hm := range hs.members {
		if ep := hm.endpoint; ep != nil {
			hm.score.ProbeDown = ep.Prober.Snapshot().Health == probe.HealthDown
			hm.score.Inflight = ep.Prober.Inflight.Load()
		} else {
			hm.score.ProbeDown = hm.target.Upstream.ProbesDown()
			hm.score.Inflight = hm.inflight.Load()
		}
		before[i] = hm.score.Level
	}
	ev := hs.scores.Tick(t)
	hs.Apply()
	for i, hm := range hs.members {
		if hm.score.Level != before[i] {
			group := hs.group
			if hm.target != nil {
				group = hm.target.Group
			}
			SchedulerTransitions.WithLabelValues(hs.gateway, hs.alias, group, hm.score.Level.String()).Inc()
		}
	}
	lines := hs.Lines(ev, nil)
	hs.mu.Unlock()
	hs.write(lines)
}

// logLine is one line of the scheduler's log, rendered under the set's
// lock and written after it.
type logLine struct {
	level  zapcore.Level
	msg    string
	fields []zap.Field
}

func (hs *SetHealth) write(lines []logLine) {
	for _, l := range lines {
		if c := hs.logger.Check(l.level, l.msg); c != nil {
			c.Write(l.fields...)
		}
	}
}

// Lines renders the set's transitions as the seed's scheduler logged
// them: one line each, with the numbers that caused it. byHand is the
// member whose weight was set through the admin API, if any. The set's
// lock is held.
func (hs *SetHealth) Lines(ev []healthscore.Event, byHand *healthscore.Member) []logLine {
	// a ramp's last step comes with the member's recovery
	recovered := map[*healthscore.Member]bool{}
	for _, e := range ev {
		if e.Kind == healthscore.EventRecovered {
			recovered[e.Member] = true
		}
	}
	out := make([]logLine, 0, len(ev))
	for _, e := range ev {
		if l, ok := hs.line(e, byHand, recovered); ok {
			out = append(out, l)
		}
	}
	return out
}

// line renders one transition.
func (hs *SetHealth) line(e healthscore.Event, byHand *healthscore.Member, recovered map[*healthscore.Member]bool) (logLine, bool) {
	m := e.Member
	numbered := func(level zapcore.Level, msg string) (logLine, bool) {
		return logLine{level, msg, hs.fields(m, eventNumbers(e)...)}, true
	}
	switch e.Kind {
	case healthscore.EventAlert:
		return numbered(zapcore.WarnLevel, fmt.Sprintf("route[%s] %s: near the thresholds", m.Name, healthNumbers(e.Stats, m.Policy)))
	case healthscore.EventAlertOver:
		return numbered(zapcore.InfoLevel, fmt.Sprintf("route[%s] %s: back under the alert levels", m.Name, healthNumbers(e.Stats, m.Policy)))
	case healthscore.EventDegrade:
		return numbered(zapcore.WarnLevel, fmt.Sprintf("route[%s] %s", m.Name, healthNumbersOver(e.Stats, m.Policy)))
	case healthscore.EventBreak:
		return numbered(zapcore.WarnLevel, fmt.Sprintf("route[%s] broken: %s", m.Name, breakWhy(e)))
	case healthscore.EventKept:
		return numbered(zapcore.WarnLevel, fmt.Sprintf("route[%s] %s", m.Name, keptWhy(e)))
	case healthscore.EventPanic:
		return logLine{zapcore.ErrorLevel, "scheduler panic: every member of " + hs.what() + " is sick; traffic goes to all by weight", hs.fields(nil)}, true
	case healthscore.EventPanicOver:
		return logLine{zapcore.InfoLevel, "scheduler panic over: " + hs.what() + " has a healthy member again", hs.fields(nil)}, true
	case healthscore.EventWeight:
		return logLine{zapcore.InfoLevel, fmt.Sprintf("scheduler %s: weight %s %d -> %d", hs.weightVerb(e, byHand, recovered), m.Name, e.From, e.To),
			hs.fields(m, zap.Int("from", e.From), zap.Int("to", e.To))}, true
	case healthscore.EventDrained:
		var on []string
		for _, o := range hs.scores.Members {
			if o.Weight > 0 {
				on = append(on, o.Name)
			}
		}
		return logLine{zapcore.InfoLevel, fmt.Sprintf("route recovered, traffic fully on %s", strings.Join(on, ", ")),
			hs.fields(m, zap.Strings("on", on))}, true
	case healthscore.EventRecovered:
		return logLine{zapcore.InfoLevel, fmt.Sprintf("route healthy: %s back at weight %d", m.Name, m.Weight), hs.fields(m)}, true
	}
	return logLine{}, false
}

// fields are a line's fields: the set (or group), the member and its
// health if any, then extra.
func (hs *SetHealth) fields(m *healthscore.Member, extra ...zap.Field) []zap.Field {
	f := []zap.Field{zap.String("gateway", hs.gateway), zap.String("alias", hs.alias), zap.String("set", hs.set)}
	if hs.weighted == nil {
		f = []zap.Field{zap.String("gateway", hs.gateway), zap.String("group", hs.group)}
	}
	if m != nil {
		f = append(f, zap.String("member", m.Name), zap.String("health", m.Level.String()))
	}
	return append(f, extra...)
}

// eventNumbers are the numbers behind a transition.
func eventNumbers(e healthscore.Event) []zap.Field {
	return []zap.Field{zap.Float64("error_rate", e.Stats.ErrorRate), zap.Int64("p99_ms", e.Stats.P99.Milliseconds()),
		zap.Int("requests", e.Stats.Requests)}
}

// keptWhy says why a member kept in service should be out, as the line it
// would have had, and what kept it.
func keptWhy(e healthscore.Event) string {
	m := e.Member
	why := healthNumbersOver(e.Stats, m.Policy)
	if e.Probes || (e.Stats.Requests >= m.Policy.MinRequests && e.Stats.Errors == e.Stats.Requests) {
		why = "broken: " + breakWhy(e)
	}
	kept := "the last member in service"
	if e.Capped {
		kept = "the most the set may take out are out (max_degraded)"
	}
	return why + ": kept in service, " + kept
}

// weightVerb names a weight change: set by hand, restored on the way
// back, or the level that moved it.
func (hs *SetHealth) weightVerb(e healthscore.Event, byHand *healthscore.Member, recovered map[*healthscore.Member]bool) string {
	m := e.Member
	switch {
	case m == byHand:
		return "set"
	case e.To > e.From && (m.Level == healthscore.Recovering || recovered[m] || hs.scores.Panic):
		// a panic gives a member out its weight back: no "break" going up
		return "restore"
	case m.Level == healthscore.Degraded:
		return "degrade"
	case m.Level == healthscore.Broken:
		return "break"
	case e.To < e.From:
		return "demote"
	}
	return "promote"
}

// breakWhy says why a member is (or would be) broken.
func breakWhy(e healthscore.Event) string {
	if e.Probes {
		return "its health checks fail"
	}
	return fmt.Sprintf("every request failed (%d of %d)", e.Stats.Errors, e.Stats.Requests)
}

// healthNumbers renders a member's numbers as the seed's scheduler did:
// `p99=1120ms, errorRate=6.1%`, the p99 where the policy bounds it.
func healthNumbers(st healthscore.Stats, p healthscore.Policy) string {
	s := fmt.Sprintf("errorRate=%.1f%%", st.ErrorRate*100)
	if p.P99 > 0 {
		return fmt.Sprintf("p99=%dms, ", st.P99.Milliseconds()) + s
	}
	return s
}

// healthNumbersOver is healthNumbers marking those over a threshold:
// `p99=1120ms > 800ms, errorRate=6.1%`.
func healthNumbersOver(st healthscore.Stats, p healthscore.Policy) string {
	var parts []string
	if p.P99 > 0 {
		s := fmt.Sprintf("p99=%dms", st.P99.Milliseconds())
		if st.P99 > p.P99 {
			s += fmt.Sprintf(" > %dms", p.P99.Milliseconds())
		}
		parts = append(parts, s)
	}
	s := fmt.Sprintf("errorRate=%.1f%%", st.ErrorRate*100)
	if st.ErrorRate > p.ErrorRate {
		s += fmt.Sprintf(" > %.1f%%", p.ErrorRate*100)
	}
	return strings.Join(append(parts, s), ", ")
}

// State is a member's health for the state document, and its weight
// now (the round robin's is finer).
func (hm *HealthMember) State() (*adminapi.TargetHealthState, int) {
	hs := hm.set
	hs.mu.Lock()
	defer hs.mu.Unlock()
	m := hm.score
	inflight := hm.inflight.Load()
	if hm.endpoint != nil {
		inflight = hm.endpoint.Prober.Inflight.Load()
	}
	return &adminapi.TargetHealthState{
		Level: m.Level.String(), Since: m.Since.UTC().Format(time.RFC3339), Sick: m.Sick, Panic: hs.scores.Panic,
		ErrorRate: m.Last.ErrorRate, P99Ms: m.Last.P99.Milliseconds(), Requests: m.Last.Requests,
		Inflight: inflight,
	}, m.Weight
}

// healthObserver counts an attempt in its member's window, if it is
// watched, in its endpoint's, if its vllm group has health, and its
// latency for its set's latency strategy, if it has one. The latency is
// to the first byte for a stream, of the whole answer otherwise;
// attempts that say nothing of the upstream are left out.
type healthObserver struct{ clock clock.Clock }

// watchesHealth reports whether attempts on t count for health or
// latency.
func watchesHealth(t *Target) bool {
	return t.Seen.Health != nil || t.Seen.latency != nil || (t.Upstream.VLLM != nil && t.Upstream.VLLM.Scored)
}

func (healthObserver) AttemptBegan(ctx context.Context, a *AttemptRecord) context.Context {
	if hm := a.Target.Seen.Health; hm != nil {
		hm.inflight.Add(1)
	}
	return ctx
}

func (h healthObserver) AttemptEnded(a *AttemptRecord) {
	t, res := a.Target, &a.Result
	hm := t.Seen.Health
	if hm != nil {
		hm.inflight.Add(-1)
	}
	var epm *HealthMember // the endpoint's, in a vllm group with health
	if res.Endpoint != nil && res.Endpoint.Score != nil {
		epm = res.Endpoint.Score.Member.(*HealthMember)
	}
	switch res.Verdict {
	case VerdictFailure:
		if hm != nil {
			hm.record(true, 0)
		}
		if epm != nil {
			epm.record(true, 0)
		}
	case VerdictSuccess:
		end := h.clock.Now()
		lat := end.Sub(a.Began)
		if a.FirstByte > 0 {
			lat = a.FirstByte
		}
		if hm != nil {
			hm.record(false, lat)
		}
		if epm != nil {
			epm.record(false, lat)
		}
		if t.Seen.latency != nil {
			t.Seen.latency.add(end, lat)
		}
	}
}
