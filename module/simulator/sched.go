// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package simulator

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// errQueueFull is returned by acquire when MaxQueued is reached.
var errQueueFull = errors.New("queue full")

// scheduler models vLLM's admission: each engine runs at most slots
// requests; further requests wait in that engine's queue, ordered by
// priority (lower first) and then arrival, as vLLM's priority policy
// orders its waiting queue (with fcfs every priority is 0: arrival order).
// A request that got a slot keeps it: none is preempted. A request is
// assigned on arrival to the engine with the lowest 4·waiting + running
// (vLLM's data-parallel load score), ties going round-robin.
type scheduler struct {
	slots     int
	maxQueued int // cap on waiting+running over all engines; 0 = none

	mu      sync.Mutex
	engines []engineSched
	total   int // running + waiting over all engines
	next    int // round-robin start for ties
	onLoad  func(engine, running, waiting int)
}

type engineSched struct {
	running int
	queue   list.List // of *waiter
}

type waiter struct {
	ready    chan struct{}
	priority int64
	granted  bool // guarded by scheduler.mu
}

func newScheduler(engines, slots, maxQueued int, onLoad func(engine, running, waiting int)) *scheduler {
	s := &scheduler{slots: slots, maxQueued: maxQueued, engines: make([]engineSched, engines), onLoad: onLoad}
	for e := range s.engines {
		s.engines[e].queue.Init()
		onLoad(e, 0, 0)
	}
	return s
}

// acquire returns the engine the request runs on once it holds a slot,
// waiting behind the requests of its engine with a priority value lower
// than or equal to priority. It fails with errQueueFull, or with ctx's
// error if ctx ends while waiting.
func (s *scheduler) acquire(ctx context.Context, priority int64) (int, error) {
	s.mu.Lock()
	if s.maxQueued > 0 && s.total >= s.maxQueued {
		s.mu.Unlock()
		return -1, errQueueFull
	}
	e := s.pick()
	es := &s.engines[e]
	s.total++
	if es.running < s.slots && es.queue.Len() == 0 {
		es.running++
		s.onLoad(e, es.running, 0)
		s.mu.Unlock()
		return e, nil
	}
	w := &waiter{ready: make(chan struct{}), priority: priority}
	elem := es.enqueue(w)
	s.onLoad(e, es.running, es.queue.Len())
	s.mu.Unlock()

	select {
	case <-w.ready:
		return e, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted {
		s.mu.Unlock()
		s.release(e)
		return -1, ctx.Err()
	}
	es.queue.Remove(elem)
	s.total--
	s.onLoad(e, es.running, es.queue.Len())
	s.mu.Unlock()
	return -1, ctx.Err()
}

// enqueue puts w behind the waiters whose priority value is lower or
// equal, ahead of the others; s.mu must be held. Searching from the back,
// equal priorities (all of them under fcfs) cost one step.
func (es *engineSched) enqueue(w *waiter) *list.Element {
	for e := es.queue.Back(); e != nil; e = e.Prev() {
		if e.Value.(*waiter).priority <= w.priority {
			return es.queue.InsertAfter(w, e)
		}
	}
	return es.queue.PushFront(w)
}

// pick chooses an engine; s.mu must be held.
func (s *scheduler) pick() int {
	n := len(s.engines)
	if n == 1 {
		return 0
	}
	best, bestScore := -1, 0
	for i := 0; i < n; i++ {
		e := (s.next + i) % n
		score := 4*s.engines[e].queue.Len() + s.engines[e].running
		if best < 0 || score < bestScore {
			best, bestScore = e, score
		}
	}
	s.next = (s.next + 1) % n
	return best
}

// release frees the slot held on engine e, handing it to the first waiter.
func (s *scheduler) release(e int) {
	s.mu.Lock()
	es := &s.engines[e]
	s.total--
	if front := es.queue.Front(); front != nil {
		w := es.queue.Remove(front).(*waiter)
		w.granted = true
		close(w.ready)
	} else {
		es.running--
	}
	s.onLoad(e, es.running, es.queue.Len())
	s.mu.Unlock()
}

// load returns running and waiting summed over engines.
func (s *scheduler) load() (running, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.engines {
		running += s.engines[i].running
		waiting += s.engines[i].queue.Len()
	}
	return running, waiting
}
