// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"sync/atomic"
	"time"
)

// warnEvery lets one warning through per warnInterval, so that an
// upstream that keeps sending bad numbers is reported without flooding
// the log.
type warnEvery struct{ next atomic.Int64 } // unix nanoseconds

const warnInterval = time.Minute

// allow reports whether a warning may be written at t.
func (w *warnEvery) allow(t time.Time) bool {
	if w == nil {
		return true
	}
	next := w.next.Load()
	return t.UnixNano() >= next && w.next.CompareAndSwap(next, t.Add(warnInterval).UnixNano())
}
