// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package loop

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A loop runs when woken (its pause is an hour), at the start when told
// to, and once more at the end (Last); then it has returned.
func TestALoopRunsWhenWokenAndEndsWithItsContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		when  When
		first int // runs before the first wake
	}{{"after a pause", AfterAPause, 0}, {"at start", AtStart, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			wake := make(chan struct{})
			runs := make(chan int, 10)
			n := 0
			var wg sync.WaitGroup
			var last bool
			Loop{Name: "test", Every: time.Hour, Wake: wake, When: tc.when, Last: func() { last = true }}.
				Go(ctx, &wg, func(context.Context) { n++; runs <- n })
			if tc.first == 1 {
				if got := <-runs; got != 1 {
					t.Fatalf("first run %d", got)
				}
			}
			for i := range 3 {
				wake <- struct{}{} // received by the loop: it is pausing, not running
				if got := <-runs; got != tc.first+i+1 {
					t.Fatalf("run %d after wake %d", got, i+1)
				}
			}
			cancel()
			wg.Wait()
			if !last || len(runs) != 0 {
				t.Fatalf("after the end: last ran %v, %d more runs", last, len(runs))
			}
		})
	}
}

// A panic ends the loop, not the process, and is logged with its stack.
func TestAPanicEndsTheLoopLogged(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	var wg sync.WaitGroup
	Loop{Name: "sampler", Every: time.Hour, When: AtStart, Logger: zap.New(core)}.
		Go(context.Background(), &wg, func(context.Context) { panic("boom") })
	wg.Wait()
	entries := logs.All()
	if len(entries) != 1 || entries[0].Message != "sampler panicked" {
		t.Fatalf("logged %+v", entries)
	}
	if f := entries[0].ContextMap(); f["error"] != "boom" || f["stack"] == "" {
		t.Fatalf("fields %v", f)
	}
}

// The pause is read again after each run: a setting changed meanwhile
// takes effect at once.
func TestThePauseIsReadAfterEachRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pauses := make(chan time.Duration, 3)
	pauses <- time.Hour
	pauses <- 0 // after the first run: the next comes at once
	pauses <- time.Hour
	runs := make(chan struct{}, 3)
	wake := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop{Name: "probe", Pause: func() time.Duration { return <-pauses }, Wake: wake}.
			Run(ctx, func(context.Context) { runs <- struct{}{} })
	}()
	wake <- struct{}{}
	<-runs // woken
	<-runs // the zero pause
	cancel()
	<-done
	if len(pauses) != 0 {
		t.Fatalf("%d pauses not read", len(pauses))
	}
}
