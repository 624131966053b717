// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package priority_test

import (
	"context"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
)

func TestParse(t *testing.T) {
	for name, want := range map[string]priority.Class{"": priority.Standard, "standard": priority.Standard, "interactive": priority.Interactive, "batch": priority.Batch} {
		if c, err := priority.Parse(name); err != nil || c != want {
			t.Errorf("Parse(%q) = %v, %v", name, c, err)
		}
	}
	if _, err := priority.Parse("urgent"); err == nil {
		t.Error("an unknown class was taken")
	}
	if priority.Interactive.VLLM() >= priority.Standard.VLLM() || priority.Standard.VLLM() >= priority.Batch.VLLM() {
		t.Error("vLLM runs lower priorities first: interactive must be lowest")
	}
}

// Each class fills its share of the red line; interactive the whole of it.
func TestLimits(t *testing.T) {
	s, err := (&priority.Config{}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		class   priority.Class
		redLine int64
		want    int64
	}{
		{priority.Interactive, 8, 8}, {priority.Standard, 8, 6}, {priority.Batch, 8, 4},
		{priority.Batch, 1, -1}, // nothing of a single slot: it is the reserve
		{priority.Batch, 0, 0},  // no red line, no share
		{priority.Standard, -1, -1},
	} {
		if got := s.Limit(c.class, c.redLine); got != c.want {
			t.Errorf("%v of %d: %d, want %d", c.class, c.redLine, got, c.want)
		}
	}
	for _, bad := range []priority.Config{{Standard: 1.5}, {Standard: 0.4, Batch: 0.6}, {Batch: -0.1}, {QueueSize: -1}} {
		if _, err := bad.Resolve(); err == nil {
			t.Errorf("%+v was taken", bad)
		}
	}
}

// Waiters are woken first come, first served, one per slot given back; a
// wake whose waiter leaves goes on to the next; a full list takes none.
func TestWaitlist(t *testing.T) {
	w := priority.NewWaitlist(2)
	a, b := w.Enter(), w.Enter()
	if a == nil || b == nil || w.Enter() != nil || w.Len() != 2 {
		t.Fatal("a waitlist of 2 takes two, then none")
	}
	a.Arm()
	b.Arm()
	w.Wake()
	if !woken(a) || woken(b) {
		t.Fatal("the first waiter is woken first")
	}
	w.Wake() // a acts on its wake: the next goes to b
	if !woken(b) {
		t.Fatal("a second slot wakes the second waiter")
	}
	a.Leave()
	if w.Len() != 1 {
		t.Fatal("a left")
	}
	c := w.Enter()
	c.Arm()
	b.Arm()
	w.Wake() // to b
	b.Leave()
	if !woken(c) {
		t.Fatal("a wake its waiter left unread goes to the next")
	}
	c.Leave()
	if w.Len() != 0 {
		t.Fatal("all left")
	}
	w.Wake() // nobody: nothing
}

func TestWaitEnds(t *testing.T) {
	w := priority.NewWaitlist(1)
	tk := w.Enter()
	defer tk.Leave()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tk.Wait(ctx, nil) {
		t.Error("a canceled request was woken")
	}
	fired := make(chan time.Time, 1)
	fired <- time.Time{}
	if tk.Wait(context.Background(), fired) {
		t.Error("past its deadline a request was woken")
	}
}

func woken(t *priority.Ticket) bool {
	return t.Wait(context.Background(), closedDeadline())
}

// closedDeadline has fired already: Wait reports only a wake that came.
func closedDeadline() <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// A wake its waiter cannot use goes on to the next waiter not woken
// behind it, and stops at the end of the list.
func TestPassOn(t *testing.T) {
	w := priority.NewWaitlist(3)
	a, b, c := w.Enter(), w.Enter(), w.Enter()
	defer a.Leave()
	defer b.Leave()
	defer c.Leave()
	w.Wake() // to a
	if !woken(a) {
		t.Fatal("the head is woken first")
	}
	a.PassOn()
	if !woken(b) || woken(c) {
		t.Fatal("a wake passed on goes to the next waiter only")
	}
	b.PassOn()
	if !woken(c) {
		t.Fatal("and on")
	}
	c.PassOn() // the end of the list: nobody
	if woken(a) || woken(b) {
		t.Error("a wake passed on past the end came back")
	}
}

// More room (a fleet's share grown, endpoints added) wakes every waiter;
// a queue resized by a reload keeps those waiting and takes as many more
// as its new size allows.
func TestWakeAllAndResize(t *testing.T) {
	w := priority.NewWaitlist(2)
	a, b := w.Enter(), w.Enter()
	defer a.Leave()
	defer b.Leave()
	w.WakeAll()
	if !woken(a) || !woken(b) {
		t.Error("WakeAll left a waiter asleep")
	}
	if w.Enter() != nil {
		t.Fatal("a full queue took one more")
	}
	w.Resize(3)
	c := w.Enter()
	if c == nil || w.Len() != 3 || w.Size() != 3 {
		t.Fatal("a queue grown by a reload took none more")
	}
	c.Leave()
}
