// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
)

// Why the gateway cut a started answer short (an attemptWriter's cut).
const (
	cutNone int32 = iota
	cutIdle       // the upstream sent nothing for the target's idle_timeout
	cutDown       // the endpoint's health probes marked it down
)

// causeEndpointDown is what a cut of an endpoint marked down tells the
// client and the log.
const causeEndpointDown = "the endpoint was marked down (its health probes failed)"

// idleLooks is how many times per idle_timeout a watchdog looks at its
// answer: it cuts one whose upstream was silent for that many looks in a
// row, after between idle_timeout and 1¼ of it without a read.
const idleLooks = 4

// watchdog watches one attempt's started answer, from its response head
// to its end: for an upstream that sends nothing for the target's
// idle_timeout, with one timer that looks every quarter of it (a read
// costs the answer two atomic additions, nothing more), and for the
// probes' taking its vLLM endpoint down, which cut every answer the
// endpoint registered that stopped reading (see probe.Stream). Watchdogs are
// pooled with their timers, so that watching costs an answer no
// allocation.
type watchdog struct {
	timer *time.Timer
	aw    atomic.Pointer[attemptWriter] // nil once released
	look  atomic.Int64                  // the time between looks
	quiet atomic.Int32                  // looks in a row that saw no read
	seen  atomic.Uint32                 // the answer's reads at the last look
	armed bool                          // the timer runs (the attempt's)
	p     *probe.Prober                 // the endpoint it is registered with
	shard uint8                         // which of an endpoint's shards it registers in
}

// dogsMade spreads pooled watchdogs over the shards.
var dogsMade atomic.Uint32

var watchdogs = sync.Pool{New: func() any {
	w := &watchdog{shard: uint8(dogsMade.Add(1) % probe.Shards)}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}}

// watch starts watching the attempt's answer as its response head goes
// to the client; unwatch ends it.
func (aw *attemptWriter) watch() {
	var p *probe.Prober
	if ep := aw.slot.Endpoint; ep != nil {
		p = ep.Prober
	}
	idle := aw.target.Run.Idle
	if (idle <= 0 && p == nil) || aw.guard.cancel == nil || aw.guard.dog != nil {
		return
	}
	w := watchdogs.Get().(*watchdog)
	w.quiet.Store(0)
	w.seen.Store(aw.guard.reads.Load())
	w.aw.Store(aw)
	aw.guard.dog = w
	if idle > 0 {
		w.look.Store(int64(idle / idleLooks))
		w.armed = true
		w.timer.Reset(idle / idleLooks)
	}
	if p != nil {
		w.p = p
		p.Watch(w, w.shard)
	}
}

// unwatch stops the attempt's watchdog, if any, and pools it unless its
// timer is running its look right now.
func (aw *attemptWriter) unwatch() {
	w := aw.guard.dog
	if w == nil {
		return
	}
	aw.guard.dog = nil
	if w.p != nil {
		w.p.Unwatch(w, w.shard)
		w.p = nil
	}
	w.aw.Store(nil)
	// a look that ran already either ended (it cut the answer, or the
	// timer is set again: Stop reports true) or is under way: its
	// watchdog is left to the collector, never shared with another answer
	if w.armed && !w.timer.Stop() {
		return
	}
	w.armed = false
	watchdogs.Put(w)
}

// fire is the idle timer's look: a read since the last one (or a write to
// the client still under way: a slow client is no idle upstream) starts
// the count again; idleLooks looks without one cut the answer. Setting
// the timer again is its last act (see unwatch).
func (w *watchdog) fire() {
	aw := w.aw.Load()
	if aw == nil {
		return
	}
	if r := aw.guard.reads.Load(); r != w.seen.Load() || r&1 == 1 {
		w.seen.Store(r)
		w.quiet.Store(0)
	} else if w.quiet.Add(1) >= idleLooks {
		aw.cutShort(cutIdle)
		return
	}
	w.timer.Reset(time.Duration(w.look.Load()))
}

// cutShort ends the attempt's answer for the given reason (the first
// one wins) by canceling its context: the proxy's read of the upstream
// fails, and try tells the client why (see midStreamFailure).
func (aw *attemptWriter) cutShort(why int32) {
	if aw.guard.cut.CompareAndSwap(cutNone, why) {
		aw.guard.cancel()
	}
}

// StreamReads implements probe.Stream.
func (w *watchdog) StreamReads() (uint32, bool) {
	aw := w.aw.Load()
	if aw == nil {
		return 0, false
	}
	return aw.guard.reads.Load(), true
}

// CutDown implements probe.Stream.
func (w *watchdog) CutDown() {
	if aw := w.aw.Load(); aw != nil {
		aw.cutShort(cutDown)
	}
}

// Interface guards
var _ probe.Stream = (*watchdog)(nil)
