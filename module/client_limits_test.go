// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"testing"
	"time"
)

func TestRateLimitRequests(t *testing.T) {
	var l rateLimit
	t0 := time.Unix(1000, 0)
	// 3 a minute: three at once, then one every 20 s
	for i := range 3 {
		if w := l.take(3, t0); w != 0 {
			t.Fatalf("request %d waits %v", i, w)
		}
	}
	if w := l.take(3, t0); w != 20*time.Second {
		t.Fatalf("the fourth waits %v, want 20s", w)
	}
	if w := l.take(3, t0.Add(19*time.Second)); w != time.Second {
		t.Fatalf("19 s later: wait %v, want 1s", w)
	}
	if w := l.take(3, t0.Add(20*time.Second)); w != 0 {
		t.Fatalf("20 s later: wait %v", w)
	}
	// an idle minute gives the whole burst back, no more
	t1 := t0.Add(5 * time.Minute)
	for i := range 3 {
		if w := l.take(3, t1); w != 0 {
			t.Fatalf("after a pause, request %d waits %v", i, w)
		}
	}
	if w := l.take(3, t1); w == 0 {
		t.Fatal("the burst grew with the pause")
	}
}

func TestRateLimitTokens(t *testing.T) {
	var l rateLimit
	t0 := time.Unix(1000, 0)
	// 600 a minute: 10 a second
	if w := l.wait(600, t0); w != 0 {
		t.Fatalf("unused: wait %v", w)
	}
	l.charge(600, 500, t0)
	if w := l.wait(600, t0); w != 0 {
		t.Fatalf("500 of 600: wait %v", w)
	}
	l.charge(600, 700, t0) // 1200: the minute's use is 600 over
	if w := l.wait(600, t0); w != 60*time.Second+100*time.Millisecond {
		t.Fatalf("1200 of 600: wait %v", w)
	}
	if w := l.wait(600, t0.Add(61*time.Second)); w != 0 {
		t.Fatalf("a minute later: wait %v", w)
	}
	if w := l.wait(0, t0); w != 0 {
		t.Fatal("no limit waits")
	}
}
