// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package protocol

import (
	"math"
	"strconv"
)

// maxUpstreamCount is the largest token count taken from an upstream
// (package vllmmetrics bounds metric values alike); anything larger is a
// bug or a lie, not a measurement.
const maxUpstreamCount = 1e9

// upstreamCount reads a JSON number that must be a count: an integer in
// [0, maxUpstreamCount] (12 and 12.0 alike). It reports false for
// anything else: a fraction, a negative or absurd number, a string, null
// or nothing.
func upstreamCount(raw []byte) (int64, bool) {
	if absentValue(raw) {
		return 0, false // without parsing: a parse error allocates
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		if n < 0 || n > maxUpstreamCount {
			return 0, false
		}
		return n, true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !validUpstreamValue(f) || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// validUpstreamValue tells a plausible number: finite, not negative,
// at most maxUpstreamCount.
func validUpstreamValue(v float64) bool {
	return v >= 0 && v <= maxUpstreamCount // false for NaN and ±Inf too
}
