// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package loop runs the gateway's background work: probes, model checks,
// the health scheduler, the books' samplers and savers, the keys file's
// watch. Each is a Loop, run again and again until its context ends, one
// pause apart; a run can be asked for at once (Wake), and a panic ends the
// loop with its stack logged instead of the process. It is a leaf: it
// imports nothing of the product.
package loop

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Loop is one piece of background work.
type Loop struct {
	// What it is, in the log of a panic.
	Name string

	// The pause after each run, read again after each: a settings change
	// takes effect at the next pause. Every is used when Pause is nil.
	Every time.Duration
	Pause func() time.Duration

	// Ends a pause at once when it receives: a run now. Default: none.
	Wake <-chan struct{}

	// When the first run comes: at the start (Start) or after the first
	// pause (the default).
	When When

	// Runs once when the context ends, after the last run. Default:
	// nothing.
	Last func()

	// Where a panic is logged. Default: nowhere (the loop still ends).
	Logger *zap.Logger
}

// When says when a loop's first run comes.
type When int8

const (
	// AfterAPause is a first run one pause after the start.
	AfterAPause When = iota
	// AtStart is a first run at once.
	AtStart
)

// Go runs the loop on its own goroutine until ctx is done; wg, when not
// nil, counts it until it has returned (Last included).
func (l Loop) Go(ctx context.Context, wg *sync.WaitGroup, run func(context.Context)) {
	if wg != nil {
		wg.Add(1)
	}
	go func() {
		if wg != nil {
			defer wg.Done()
		}
		l.Run(ctx, run)
	}()
}

// Run runs the loop on the calling goroutine until ctx is done.
func (l Loop) Run(ctx context.Context, run func(context.Context)) {
	defer func() {
		if err := recover(); err != nil && l.Logger != nil {
			l.Logger.Error(l.Name+" panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
		}
	}()
	if l.Last != nil {
		defer l.Last()
	}
	if l.When == AtStart {
		run(ctx)
	}
	t := time.NewTimer(l.pause())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.Wake:
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		run(ctx)
		t.Reset(l.pause())
	}
}

func (l Loop) pause() time.Duration {
	if l.Pause != nil {
		return l.Pause()
	}
	return l.Every
}
