// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package clock is the gateway's one source of the time of day. Every
// part that keeps windows, cooldowns, holds or hysteresis is given a Clock
// when it is made and reads the time only through it, so a test drives
// time by hand (Manual) and tests that do not share an owner do not share
// a clock. It is a leaf: it imports nothing of the product.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the clock of the machine: time.Now.
var System Clock = system{}

// Process is the clock of what a Caddy config provisions (its gateways,
// the selection policies of plain proxies) and of the admin endpoints
// and metrics that span them: System, except in a test that loads a
// whole Caddy and drives its time, which sets it before loading.
var Process = System

type system struct{}

func (system) Now() time.Time { return time.Now() }

// Manual is a clock that moves only when told to. It is safe to read
// while another goroutine moves it (a gateway's background loops read the
// clock of the test that drives it).
type Manual struct{ ns atomic.Int64 }

// NewManual returns a Manual clock that reads t.
func NewManual(t time.Time) *Manual {
	m := new(Manual)
	m.Set(t)
	return m
}

// Now is the time the clock was last set to.
func (m *Manual) Now() time.Time { return time.Unix(0, m.ns.Load()) }

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) { m.ns.Store(t.UnixNano()) }

// Advance moves the clock by d and returns the new time.
func (m *Manual) Advance(d time.Duration) time.Time { return time.Unix(0, m.ns.Add(int64(d))) }

// Interface guards
var (
	_ Clock = system{}
	_ Clock = (*Manual)(nil)
)
