// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package healthscore

import (
	"math"
	"slices"
	"time"
)

// Policy is a member's thresholds and timings.
type Policy struct {
	// The error rate above which the member is degraded; 0: not watched.
	ErrorRate float64
	// The p99 latency above which the member is degraded; 0: not watched.
	P99 time.Duration
	// The share of a threshold at which an alert is raised. Default 0.8.
	AlertAt float64
	// Requests the window must hold before its numbers count. Default 20.
	MinRequests int
	// How long a degraded or broken member stays out (a broken one from
	// its probes' first pass) before its weight ramps back; doubled for
	// each relapse in a row, up to 8 times. Default 10s.
	Hold time.Duration
	// The share of its weight a recovering member gets back per step, and
	// the time between steps; a step waits while the member is at the
	// alert level, and until it has answered a quarter of MinRequests
	// since its last step within the thresholds. Defaults 0.25 and 2s.
	RampStep     float64
	RampInterval time.Duration
}

// Defaults.
const (
	DefaultAlertAt      = 0.8
	DefaultMinRequests  = 20
	DefaultHold         = 10 * time.Second
	DefaultRampStep     = 0.25
	DefaultRampInterval = 2 * time.Second
	DefaultWindow       = 10 * time.Second
	maxRelapseDoubling  = 3
	alertExit           = 0.9 // of the alert level, to leave the alert
)

// WithDefaults fills the unset fields.
func (p Policy) WithDefaults() Policy {
	if p.AlertAt <= 0 {
		p.AlertAt = DefaultAlertAt
	}
	if p.MinRequests <= 0 {
		p.MinRequests = DefaultMinRequests
	}
	if p.Hold <= 0 {
		p.Hold = DefaultHold
	}
	if p.RampStep <= 0 {
		p.RampStep = DefaultRampStep
	}
	if p.RampInterval <= 0 {
		p.RampInterval = DefaultRampInterval
	}
	return p
}

// Level is where a member stands.
type Level uint8

// The levels, from healthy to ejected. Recovering is a member on its way
// back: in service at part of its weight.
const (
	OK Level = iota
	Alert
	Recovering
	Degraded
	Broken
)

var levelNames = [...]string{"ok", "alert", "recovering", "degraded", "broken"}

func (l Level) String() string { return levelNames[l] }

// out reports whether a member at this level takes no traffic.
func (l Level) out() bool { return l >= Degraded }

// Member is one target of a weighted set, as the scheduler sees it.
type Member struct {
	Name   string
	Policy Policy  // with defaults
	Window *Window // its requests; the caller adds to it
	Base   int     // the weight it serves at when healthy

	// Set by the caller before each Tick: whether its probes fail (every
	// endpoint of its group down by its health checks), and how many
	// requests it has in flight.
	ProbeDown bool
	Inflight  int64

	Level  Level
	Since  time.Time // of the level
	Weight int       // its weight now, in the units of Base
	// its weight now in hundredths of Base's units (at least 1 while it
	// takes traffic), for the round robin: a small base still ramps
	Fine int
	Last Stats // as of the last Tick
	// Sick is set while it should be out but is kept in service: it is
	// the last healthy member, or the cap on members out is reached.
	Sick bool

	recovery
}

// recovery is a member's way back: its hold, its ramp and the answers
// each ramp step judges.
type recovery struct {
	ramp     float64   // share of Base while recovering
	until    time.Time // end of the hold
	stepAt   time.Time // of the last ramp step
	relapses int       // times in a row it went out while recovering
	drained  bool      // the end of its traffic was announced

	// its answers since the last ramp step: a step needs enough of them,
	// within the thresholds
	stepN, stepErrs, stepSlow int
}

// Record counts a request that ended at t, failed or answered after
// latency, in the member's window and in its evidence for the next ramp
// step.
func (m *Member) Record(t time.Time, failed bool, latency time.Duration) {
	m.Window.Add(t, failed, latency)
	m.stepN++
	switch {
	case failed:
		m.stepErrs++
	case m.Policy.P99 > 0 && latency > m.Policy.P99:
		m.stepSlow++
	}
}

// stepEarned reports whether the member's answers since its last step
// earn it the next: a quarter of MinRequests at least, their errors
// within the error rate, at most one in a hundred slower than the p99
// threshold.
func (m *Member) stepEarned() bool {
	p := m.Policy
	return m.stepN >= max(1, (p.MinRequests+3)/4) &&
		float64(m.stepErrs) <= p.ErrorRate*float64(m.stepN) && m.stepSlow <= m.stepN/100
}

// resetStep starts the evidence for the next step afresh.
func (m *Member) resetStep() {
	m.stepN, m.stepErrs, m.stepSlow = 0, 0, 0
}

// Carry takes over the state of old, the same member under the config
// before: its level and since, hold, ramp and relapses, and its window's
// requests when the window spans the same time. Its weight follows at the
// next Rebalance.
func (m *Member) Carry(old *Member) {
	m.Level, m.Since, m.Sick, m.Last = old.Level, old.Since, old.Sick, old.Last
	m.ramp, m.until, m.stepAt, m.relapses, m.drained = old.ramp, old.until, old.stepAt, old.relapses, old.drained
	m.stepN, m.stepErrs, m.stepSlow = old.stepN, old.stepErrs, old.stepSlow
	if old.Window != nil && m.Window != nil && old.Window.Span() == m.Window.Span() {
		*m.Window = *old.Window
	}
}

// Set is a weighted set's members and how many may be out at once.
type Set struct {
	Members []*Member
	// The most members out at once; default (0): all but one.
	MaxOut int

	Panic bool // every member is sick: traffic goes to all by weight
}

// EventKind is what an Event reports.
type EventKind uint8

// The events, in the order a Tick reports them.
const (
	EventAlert     EventKind = iota // a signal passed its alert level
	EventAlertOver                  // back under the alert levels
	EventDegrade                    // over a threshold: taken out
	EventBreak                      // probes fail, or every request failed: taken out
	EventKept                       // should be out, kept in service (last member, or the cap)
	EventPanic                      // every member sick: traffic to all
	EventPanicOver
	EventWeight    // a member's weight changed
	EventDrained   // a member taken out has no request left in flight, and the members serving are well
	EventRecovered // a recovering member is back at its whole weight
)

// Event is one transition, with the numbers that caused it.
type Event struct {
	Kind     EventKind
	Member   *Member
	Stats    Stats
	From, To int  // weights, for EventWeight
	Probes   bool // a break or a member kept: its probes failed
	Capped   bool // a member kept: by the cap on members out, not as the last in service
}

// verdict is what a member's window says at a tick.
type verdict struct{ out, broken, warn, calm, enough bool }

// Tick evaluates every member at now, moves weights, and returns what
// changed. The caller sets each member's ProbeDown and Inflight first.
func (s *Set) Tick(now time.Time) []Event {
	vs := s.verdicts(now)
	s.releaseHeld(now, vs)
	ev := s.takeOut(now, vs)
	ev, recovered := s.stepInService(now, vs, ev)
	ev = s.updatePanic(vs, ev)
	ev = append(ev, s.Rebalance()...)
	ev = append(ev, recovered...)
	return s.drainedEvents(ev)
}

// verdicts reads every member's window at now, and keeps its numbers in
// its Last.
func (s *Set) verdicts(now time.Time) []verdict {
	vs := make([]verdict, len(s.Members))
	for i, m := range s.Members {
		st := m.Window.Stats(now)
		m.Last = st
		p := m.Policy
		enough := st.Requests >= p.MinRequests
		over := func(share float64) bool {
			return enough && ((p.ErrorRate > 0 && st.ErrorRate > share*p.ErrorRate) ||
				(p.P99 > 0 && float64(st.P99) > share*float64(p.P99)))
		}
		allFail := enough && st.Errors == st.Requests
		vs[i] = verdict{out: m.ProbeDown || allFail || over(1), broken: m.ProbeDown || allFail, warn: over(p.AlertAt),
			calm: enough && !over(p.AlertAt*alertExit), enough: enough}
	}
	return vs
}

// releaseHeld handles the members out: hold, then ramp back.
func (s *Set) releaseHeld(now time.Time, vs []verdict) {
	for i, m := range s.Members {
		if !m.Level.out() {
			continue
		}
		if m.ProbeDown {
			m.until = later(m.until, now.Add(m.hold()))
			continue
		}
		if !now.Before(m.until) {
			m.Level, m.Since = Recovering, now
			m.ramp, m.stepAt = m.Policy.RampStep, now
			m.Window.Reset()
			m.resetStep()
			vs[i] = verdict{}
		}
	}
}

// takeOut takes out the members in service that should go out, the worst
// first; the last healthy member and the cap keep some in.
func (s *Set) takeOut(now time.Time, vs []verdict) []Event {
	var ev []Event
	maxOut := s.MaxOut
	if maxOut <= 0 {
		maxOut = len(s.Members) - 1
	}
	outNow, inService := 0, 0
	for _, m := range s.Members {
		if m.Level.out() {
			outNow++
		} else if m.Base > 0 {
			inService++
		}
	}
	for _, i := range s.outCandidates(vs) {
		m := s.Members[i]
		if last := m.Base > 0 && inService <= 1; last || outNow >= maxOut {
			// the last member in service, or the cap: it stays
			if !m.Sick {
				m.Sick = true
				ev = append(ev, Event{Kind: EventKept, Member: m, Stats: m.Last, Probes: m.ProbeDown, Capped: !last})
			}
			continue
		}
		if m.Base > 0 {
			inService--
		}
		outNow++
		level := Degraded
		if vs[i].broken {
			level = Broken
		}
		ev = append(ev, m.goOut(now, level))
	}
	return ev
}

// outCandidates lists the members in service whose verdict is out, the
// worst first.
func (s *Set) outCandidates(vs []verdict) []int {
	var cands []int
	for i, m := range s.Members {
		if !m.Level.out() && vs[i].out {
			cands = append(cands, i)
		}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		return worse(s.Members[b].Last, s.Members[a].Last)
	})
	return cands
}

// goOut takes the member out at now, to level (Degraded or Broken), and
// returns the event.
func (m *Member) goOut(now time.Time, level Level) Event {
	if m.Level == Recovering {
		m.relapses++
	}
	kind := EventDegrade
	if level == Broken {
		kind = EventBreak
	}
	m.Level, m.Since, m.Sick, m.drained = level, now, false, false
	m.until = now.Add(m.hold())
	return Event{Kind: kind, Member: m, Stats: m.Last, Probes: m.ProbeDown}
}

// stepInService moves the members in service through the alert levels and
// the ramp steps; it appends their alerts to ev and returns the members
// that recovered apart, as they are reported after the weights.
func (s *Set) stepInService(now time.Time, vs []verdict, ev []Event) (_, recovered []Event) {
	for i, m := range s.Members {
		if m.Level.out() {
			continue
		}
		if !vs[i].out {
			m.Sick = false
		}
		switch {
		case m.Level == Recovering:
			if m.stepEarned() && !vs[i].warn && now.Sub(m.stepAt) >= m.Policy.RampInterval {
				m.ramp, m.stepAt = m.ramp+m.Policy.RampStep, now
				m.resetStep()
				if m.ramp >= 1-1e-9 {
					m.Level, m.Since, m.relapses = OK, now, 0
					recovered = append(recovered, Event{Kind: EventRecovered, Member: m})
				}
			}
		case vs[i].warn && m.Level == OK:
			m.Level, m.Since = Alert, now
			ev = append(ev, Event{Kind: EventAlert, Member: m, Stats: m.Last})
		case vs[i].calm && m.Level == Alert:
			// under the alert levels by a margin, with enough requests
			// to tell: no line every tick near a level
			m.Level, m.Since = OK, now
			ev = append(ev, Event{Kind: EventAlertOver, Member: m, Stats: m.Last})
		}
	}
	return ev, recovered
}

// updatePanic enters or leaves the panic: no member left that is in
// service and well.
func (s *Set) updatePanic(vs []verdict, ev []Event) []Event {
	allSick := len(s.Members) > 0
	for i, m := range s.Members {
		if !m.Level.out() && !vs[i].out && m.Base > 0 {
			allSick = false
		}
	}
	if allSick == s.Panic {
		return ev
	}
	s.Panic = allSick
	kind := EventPanic
	if !allSick {
		kind = EventPanicOver
	}
	ev = append(ev, Event{Kind: kind})
	for _, m := range s.Members {
		// the panic sends traffic to the members out again: once it is
		// over, the end of their traffic is news again
		m.drained = m.drained && !allSick
	}
	return ev
}

// drainedEvents appends the members drained: the route has recovered once
// a member out has no request left and the members that carry the traffic
// are well: not while one of them is kept in service sick, nor in a panic.
func (s *Set) drainedEvents(ev []Event) []Event {
	served := !s.Panic
	for _, m := range s.Members {
		served = served && (m.Weight == 0 || !m.Sick)
	}
	for _, m := range s.Members {
		if served && m.Level.out() && !m.drained && m.Inflight <= 0 {
			m.drained = true
			ev = append(ev, Event{Kind: EventDrained, Member: m})
		}
	}
	return ev
}

// Rebalance sets the members' weights from their bases and levels: a
// member out has 0 (unless the set panics), a recovering one its share,
// and what they lack goes to the members at their whole weight, in
// proportion to their bases. It returns the changes.
func (s *Set) Rebalance() []Event {
	total, fullBase := 0, 0
	share := make([]float64, len(s.Members))
	for i, m := range s.Members {
		total += m.Base
		switch {
		case s.Panic:
			share[i] = 1
		case m.Level.out():
		case m.Level == Recovering:
			share[i] = m.ramp
		default:
			share[i] = 1
		}
		if share[i] == 1 {
			fullBase += m.Base
		}
	}
	if fullBase == 0 {
		// nobody at a whole weight to take the rest: the recovering
		// members serve at theirs
		for i, m := range s.Members {
			if share[i] > 0 {
				share[i] = 1
				fullBase += m.Base
			}
		}
	}
	exact := make([]float64, len(s.Members))
	sum := 0.0
	for i, m := range s.Members {
		exact[i] = float64(m.Base) * share[i]
		sum += exact[i]
	}
	if lost := float64(total) - sum; lost > 0 && fullBase > 0 {
		for i, m := range s.Members {
			if share[i] == 1 {
				exact[i] += lost * float64(m.Base) / float64(fullBase)
			}
		}
		sum = float64(total)
	}
	w := largestRemainder(exact, int(math.Round(sum)))
	var ev []Event
	for i, m := range s.Members {
		m.Fine = int(math.Round(exact[i] * 100))
		if exact[i] > 0 {
			m.Fine = max(m.Fine, 1)
		}
		if m.Weight != w[i] {
			ev = append(ev, Event{Kind: EventWeight, Member: m, From: m.Weight, To: w[i]})
			m.Weight = w[i]
		}
	}
	return ev
}

// hold is how long the member stays out this time.
func (m *Member) hold() time.Duration {
	return m.Policy.Hold << min(m.relapses, maxRelapseDoubling)
}

// worse orders two members' stats: positive when a is worse than b.
func worse(a, b Stats) int {
	switch {
	case a.ErrorRate != b.ErrorRate:
		if a.ErrorRate > b.ErrorRate {
			return 1
		}
		return -1
	case a.P99 != b.P99:
		if a.P99 > b.P99 {
			return 1
		}
		return -1
	}
	return 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// largestRemainder rounds xs to integers summing to total (Hamilton's
// method).
func largestRemainder(xs []float64, total int) []int {
	out := make([]int, len(xs))
	type rem struct {
		i int
		r float64
	}
	rs := make([]rem, len(xs))
	sum := 0
	for i, x := range xs {
		out[i] = int(math.Floor(x + 1e-9))
		sum += out[i]
		rs[i] = rem{i, x - float64(out[i])}
	}
	slices.SortStableFunc(rs, func(a, b rem) int {
		switch {
		case a.r > b.r:
			return -1
		case a.r < b.r:
			return 1
		}
		return 0
	})
	for k := 0; sum < total && k < len(rs); k++ {
		if rs[k].r > 1e-9 {
			out[rs[k].i]++
			sum++
		}
	}
	return out
}
