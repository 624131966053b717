// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package ratelimit

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRequests(t *testing.T) {
	var l Minute
	t0 := time.Unix(1000, 0)
	// 3 a minute: three at once, then one every 20 s
	for i := range 3 {
		if w := l.Take(3, t0); w != 0 {
			t.Fatalf("request %d waits %v", i, w)
		}
	}
	if w := l.Take(3, t0); w != 20*time.Second {
		t.Fatalf("the fourth waits %v, want 20s", w)
	}
	if w := l.Take(3, t0.Add(19*time.Second)); w != time.Second {
		t.Fatalf("19 s later: wait %v, want 1s", w)
	}
	if w := l.Take(3, t0.Add(20*time.Second)); w != 0 {
		t.Fatalf("20 s later: wait %v", w)
	}
	// an idle minute gives the whole burst back, no more
	t1 := t0.Add(5 * time.Minute)
	for i := range 3 {
		if w := l.Take(3, t1); w != 0 {
			t.Fatalf("after a pause, request %d waits %v", i, w)
		}
	}
	if w := l.Take(3, t1); w == 0 {
		t.Fatal("the burst grew with the pause")
	}
}

func TestTokens(t *testing.T) {
	var l Minute
	t0 := time.Unix(1000, 0)
	// 600 a minute: 10 a second
	if w := l.Wait(600, t0); w != 0 {
		t.Fatalf("unused: wait %v", w)
	}
	l.Charge(600, 500, t0)
	if w := l.Wait(600, t0); w != 0 {
		t.Fatalf("500 of 600: wait %v", w)
	}
	l.Charge(600, 700, t0) // 1200: the minute's use is 600 over
	if w := l.Wait(600, t0); w != 60*time.Second+100*time.Millisecond {
		t.Fatalf("1200 of 600: wait %v", w)
	}
	if w := l.Wait(600, t0.Add(61*time.Second)); w != 0 {
		t.Fatalf("a minute later: wait %v", w)
	}
	if w := l.Wait(0, t0); w != 0 {
		t.Fatal("no limit waits")
	}
}

// A reservation gives back only what is still ahead of its end: the part
// of it that elapsed was paid off by the time that passed, and giving it
// back would take the room of the reservations made after it.
func TestGiveBackOnlyWhatIsAhead(t *testing.T) {
	var l Minute
	t0 := time.Unix(1000, 0)
	// 600 a minute: 100 ms a token; 600 reserved until a minute on
	w, until := l.Reserve(600, 600, t0)
	if w != 0 || !until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("reserve: wait %v, until %v", w, until.Sub(t0))
	}
	// 30 s on, unused: 30 s of it is still ahead, 300 tokens
	l.GiveBack(600, 600, until, t0.Add(30*time.Second))
	if got := time.Duration(l.tat.Load() - t0.UnixNano()); got != 30*time.Second {
		t.Fatalf("after the give-back the limit is paid off %v on, want 30s", got)
	}
	// past its end: nothing is ahead, nothing comes back
	l.GiveBack(600, 600, until, t0.Add(2*time.Minute))
	if got := time.Duration(l.tat.Load() - t0.UnixNano()); got != 30*time.Second {
		t.Fatalf("a reservation past its end gave back: paid off %v on", got)
	}
	// a reservation behind later ones: at most what it took
	var m Minute
	_, u1 := m.Reserve(600, 100, t0) // 10 s
	m.Reserve(600, 100, t0)          // 10 s more
	m.GiveBack(600, 100, u1, t0)
	if got := time.Duration(m.tat.Load() - t0.UnixNano()); got != 10*time.Second {
		t.Fatalf("gave back more than it took: paid off %v on, want 10s", got)
	}
}

// At one instant, as many requests as the limit get in however many
// race for it.
func TestConcurrentTake(t *testing.T) {
	var l Minute
	t0 := time.Unix(1000, 0)
	var in atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if l.Take(30, t0) == 0 {
				in.Add(1)
			}
		})
	}
	wg.Wait()
	if in.Load() != 30 {
		t.Fatalf("%d of 100 let in under 30 a minute", in.Load())
	}
}

func TestRetryAfterIsWholeSecondsRoundedUp(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", -time.Second: "1", 250 * time.Millisecond: "1", time.Second: "1",
		7500 * time.Millisecond: "8", time.Hour: "600"} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestAskedReadsAnUpstreamsRetryAfter(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{nil, 0},
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"0"}}, 0},
		{http.Header{"Retry-After": {"-4"}}, 0},
		{http.Header{"Retry-After": {"99999999999999999"}}, MaxRetryAfter},
		{http.Header{"Retry-After": {"999999999999999999999"}}, 0}, // no int, no date
		{http.Header{"Retry-After": {"86400"}}, MaxRetryAfter},
		{http.Header{"Retry-After": {t0.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {t0.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"junk"}, "Retry-After": {"3"}}, 3 * time.Second},
	} {
		if got := Asked(tc.h, t0); got != tc.want {
			t.Errorf("Asked(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}
