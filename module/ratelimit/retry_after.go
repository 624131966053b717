// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package ratelimit

import (
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
