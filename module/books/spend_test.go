// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

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
	b := newSpendBook("gw", nil)
	b.Add("team-a", 1.5, day1)
	b.Add("", 0.5, day1)
	if err := b.Save(ctx, st); err != nil {
		t.Fatal(err)
	}

	// a new process reads it back
	again := newSpendBook("gw", nil)
	if err := again.load(ctx, st); err != nil {
		t.Fatal(err)
	}
	total, a := again.Spent("team-a", day1)
	if total.DayUSD != 2 || a.DayUSD != 1.5 || a.MonthUSD != 1.5 {
		t.Fatalf("after a restart: total %+v, team-a %+v", total, a)
	}
	// the next UTC day starts from zero, the month too when it is a new one
	total, a = again.Spent("team-a", day1.Add(2*time.Minute))
	if total.DayUSD != 0 || a.DayUSD != 0 || a.MonthUSD != 0 {
		t.Fatalf("a new day and month: total %+v, team-a %+v", total, a)
	}
	// a missing file is no error
	if err := newSpendBook("other", nil).load(ctx, st); err != nil {
		t.Fatal(err)
	}
}

func TestSpendRollKeepsTheDayItIsIn(t *testing.T) {
	paris := time.FixedZone("UTC+1", 3600)
	for _, tc := range []struct {
		name           string
		from, to       time.Time
		keepDay, keepM bool
	}{
		{"same day", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC), true, true},
		{"next day", time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC), time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), false, true},
		{"next month", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), false, false},
		{"same day elsewhere", time.Date(2026, 12, 1, 0, 30, 0, 0, paris), time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), true, true},
		{"a year of five digits", time.Date(12026, 5, 7, 1, 0, 0, 0, time.UTC), time.Date(12026, 5, 7, 2, 0, 0, 0, time.UTC), true, true},
		{"a day of the same number, a year later", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), time.Date(2027, 12, 1, 9, 0, 0, 0, time.UTC), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Spend
			s.roll(tc.from)
			s.DayUSD, s.MonthUSD = 1, 2
			s.roll(tc.to)
			if s.Day != tc.to.UTC().Format(time.DateOnly) || s.Month != tc.to.UTC().Format("2006-01") {
				t.Fatalf("rolled to %s / %s, want the UTC day of %v", s.Day, s.Month, tc.to)
			}
			if (s.DayUSD == 1) != tc.keepDay || (s.MonthUSD == 2) != tc.keepM {
				t.Fatalf("day %v, month %v: want the day kept %v, the month kept %v", s.DayUSD, s.MonthUSD, tc.keepDay, tc.keepM)
			}
		})
	}
}
