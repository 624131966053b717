// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package lograte lets one warning through per interval, so that an
// upstream that keeps sending bad values is reported without flooding the
// log. It is a leaf: it imports nothing of the product.
package lograte

import (
	"sync/atomic"
	"time"
)

// Every lets one warning through per Interval. Its zero value is ready;
// a nil one lets every warning through.
type Every struct{ next atomic.Int64 } // unix nanoseconds

// Interval is the least time between two warnings of one Every.
const Interval = time.Minute

// Allow reports whether a warning may be written at t.
func (w *Every) Allow(t time.Time) bool {
	if w == nil {
		return true
	}
	next := w.next.Load()
	return t.UnixNano() >= next && w.next.CompareAndSwap(next, t.Add(Interval).UnixNano())
}
