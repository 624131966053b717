// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package money

import (
	"testing"
	"time"
)

// A spent cap or budget is retried at the next UTC day or month.
func TestSpendRetryAfterIsTheNextDayOrMonth(t *testing.T) {
	day1 := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	if got := untilTomorrow(day1); got != time.Minute {
		t.Fatalf("until tomorrow: %v", got)
	}
	if got := untilNextMonth(day1); got != time.Minute {
		t.Fatalf("until next month: %v", got)
	}
	if got := untilTomorrow(day1.Add(-23 * time.Hour)); got != 23*time.Hour+time.Minute {
		t.Fatalf("until tomorrow at 00:59: %v", got)
	}
}
