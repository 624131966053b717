// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// limitTimer runs one of an attempt's time limits: its timeout, or the
// first byte's. Limit timers are pooled with their timers, as watchdogs
// are, so that a limit costs an attempt no allocation (a context with a
// deadline costs it seven). Passing a limit marks the attempt, if it has
// not committed yet, and cancels its context.
type limitTimer struct {
	timer *time.Timer
	aw    atomic.Pointer[attemptWriter] // nil once stopped
	pool  *sync.Pool                    // where it goes back to
	hit   func(*attemptWriter)          // what passing the limit does
}

// limitPool is a pool of limit timers that do hit when they fire.
func limitPool(hit func(*attemptWriter)) *sync.Pool {
	p := new(sync.Pool)
	p.New = func() any {
		lt := &limitTimer{pool: p, hit: hit}
		lt.timer = time.AfterFunc(time.Hour, lt.fire)
		lt.timer.Stop()
		return lt
	}
	return p
}

var (
	// the target's timeout: the attempt is canceled whatever its state,
	// and one not committed yet expires
	timeoutLimits = limitPool(func(aw *attemptWriter) {
		aw.state.CompareAndSwap(attemptPending, attemptExpired)
		aw.guard.cancel()
	})
	// the first byte's: a stream with nothing for the client yet is
	// abandoned for the next target (the commit races it for the state)
	firstByteLimits = limitPool(func(aw *attemptWriter) {
		if aw.state.CompareAndSwap(attemptPending, attemptAbandoned) {
			aw.guard.cancel()
		}
	})
)

// startLimit starts a limit of d on the attempt, from a pool.
func startLimit(p *sync.Pool, aw *attemptWriter, d time.Duration) *limitTimer {
	lt := p.Get().(*limitTimer)
	lt.aw.Store(aw)
	lt.timer.Reset(d)
	return lt
}

func (lt *limitTimer) fire() {
	if aw := lt.aw.Load(); aw != nil {
		lt.hit(aw)
	}
}

// stop ends the limit: it does nothing after this returns. The timer
// goes back to its pool unless it fired, since its function may still be
// running (Stop does not wait for it) and must never reach another
// attempt. stop is called once; nil does nothing.
func (lt *limitTimer) stop() {
	if lt == nil {
		return
	}
	lt.aw.Store(nil)
	if lt.timer.Stop() {
		lt.pool.Put(lt)
	}
}
