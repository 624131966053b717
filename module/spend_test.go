// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

func TestSpendRollsOverAndLasts(t *testing.T) {
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	day1 := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	b := &spendBook{clients: map[string]*spend{}}
	b.add("team-a", 1.5, day1)
	b.add("", 0.5, day1)
	if err := b.save(ctx, st, "gw"); err != nil {
		t.Fatal(err)
	}

	// a new process reads it back
	again := &spendBook{clients: map[string]*spend{}}
	if err := again.load(ctx, st, "gw"); err != nil {
		t.Fatal(err)
	}
	total, a := again.spent("team-a", day1)
	if total.DayUSD != 2 || a.DayUSD != 1.5 || a.MonthUSD != 1.5 {
		t.Fatalf("after a restart: total %+v, team-a %+v", total, a)
	}
	// the next UTC day starts from zero, the month too when it is a new one
	total, a = again.spent("team-a", day1.Add(2*time.Minute))
	if total.DayUSD != 0 || a.DayUSD != 0 || a.MonthUSD != 0 {
		t.Fatalf("a new day and month: total %+v, team-a %+v", total, a)
	}
	// a missing file is no error
	if err := (&spendBook{clients: map[string]*spend{}}).load(ctx, st, "other"); err != nil {
		t.Fatal(err)
	}
	if got := untilTomorrow(day1); got != time.Minute {
		t.Fatalf("until tomorrow: %v", got)
	}
	if got := untilNextMonth(day1); got != time.Minute {
		t.Fatalf("until next month: %v", got)
	}
}
