// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package ratelimit

import (
	"net/http"
	"strconv"
	"time"
)

// MaxRetryAfter caps any wait the gateway advises a client.
const MaxRetryAfter = 10 * time.Minute

// RetryAfter renders a wait as a Retry-After header's value: whole
// seconds, rounded up, at least 1, at most MaxRetryAfter.
func RetryAfter(d time.Duration) string {
	s := int64((min(d, MaxRetryAfter) + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

// Asked reads how long an upstream asked to wait:
// `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date.
func Asked(h http.Header, t0 time.Time) time.Duration {
	if h == nil {
		return 0
	}
	var d time.Duration
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			d = time.Duration(min(ms, float64(MaxRetryAfter/time.Millisecond)) * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); d == 0 && v != "" {
		if s, err := strconv.Atoi(v); err == nil {
			d = time.Duration(min(max(s, 0), int(MaxRetryAfter/time.Second))) * time.Second
		} else if when, err := http.ParseTime(v); err == nil {
			d = when.Sub(t0)
		}
	}
	return min(max(d, 0), MaxRetryAfter)
}
