// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package priority

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Waitlist is a bounded queue of requests waiting for a slot, first
// come, first woken: each slot given back wakes the first waiter not
// already woken, which tries again and, failing, waits on in its place.
type Waitlist struct {
	size    int
	waiting atomic.Int32 // len(q), read without the lock by Wake
	mu      sync.Mutex
	q       []*Ticket
}

// Ticket is one request's place in a Waitlist.
type Ticket struct {
	w     *Waitlist
	ch    chan struct{} // a wake, buffered
	woken bool          // guarded by w.mu: a wake is pending or being acted on
}

// NewWaitlist is a waitlist of at most size waiters.
func NewWaitlist(size int) *Waitlist { return &Waitlist{size: size} }

// Size is the most requests that may wait.
func (w *Waitlist) Size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// Resize sets the most requests that may wait from now on; those waiting
// keep their places.
func (w *Waitlist) Resize(size int) {
	w.mu.Lock()
	w.size = size
	w.mu.Unlock()
}

// WakeAll tells every waiter not already woken that slots may be free:
// the group's capacity grew (a fleet's share, endpoints added).
func (w *Waitlist) WakeAll() {
	if w == nil || w.waiting.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.q {
		if !t.woken {
			t.woken = true
			t.ch <- struct{}{}
		}
	}
}

// Len is how many requests wait.
func (w *Waitlist) Len() int { return int(w.waiting.Load()) }

// Enter takes a place at the end of the list; nil when it is full.
func (w *Waitlist) Enter() *Ticket {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.q) >= w.size {
		return nil
	}
	t := &Ticket{w: w, ch: make(chan struct{}, 1)}
	w.q = append(w.q, t)
	w.waiting.Store(int32(len(w.q)))
	return t
}

// Wake tells the first waiter not already woken that a slot may be free.
// It costs an atomic load when nobody waits.
func (w *Waitlist) Wake() {
	if w == nil || w.waiting.Load() == 0 {
		return
	}
	w.mu.Lock()
	w.wakeLocked()
	w.mu.Unlock()
}

func (w *Waitlist) wakeLocked() {
	for _, t := range w.q {
		if !t.woken {
			t.woken = true
			t.ch <- struct{}{}
			return
		}
	}
}

// PassOn hands a wake the ticket's holder could not use (the slot freed
// was not one its class may take) to the next waiter not already woken,
// behind it.
func (t *Ticket) PassOn() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	behind := false
	for _, o := range w.q {
		switch {
		case o == t:
			behind = true
		case behind && !o.woken:
			o.woken = true
			o.ch <- struct{}{}
			return
		}
	}
}

// Arm makes the ticket wakeable again, before its holder tries for a
// slot: a slot given back while it tries wakes it at once.
func (t *Ticket) Arm() {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if t.woken {
		select {
		case <-t.ch:
		default:
		}
		t.woken = false
	}
}

// Wait waits for a wake, until ctx ends or deadline fires; it reports
// whether it was woken.
func (t *Ticket) Wait(ctx context.Context, deadline <-chan time.Time) bool {
	select {
	case <-t.ch: // a wake that came wins over an end that came too
		return true
	default:
	}
	select {
	case <-t.ch:
		return true
	case <-ctx.Done():
	case <-deadline:
	}
	return false
}

// Leave gives the place up. A wake it had not acted on goes to the next
// waiter.
func (t *Ticket) Leave() {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, o := range w.q {
		if o == t {
			w.q = append(w.q[:i], w.q[i+1:]...)
			break
		}
	}
	w.waiting.Store(int32(len(w.q)))
	if t.woken && len(t.ch) > 0 {
		w.wakeLocked()
	}
}
