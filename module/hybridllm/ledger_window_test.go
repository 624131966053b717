// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"net/url"
	"testing"
	"time"
)

// The ledger answers windows up to what it holds, 31 days, by duration or
// by times, always including the unfinished minute it ends in.
func TestLedgerWindowQuery(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 30, 20, 0, time.UTC)
	for _, tc := range []struct {
		query    string
		from, to string // RFC 3339; empty: an error
	}{
		{"", "2026-12-01T09:30:20Z", "2026-12-01T10:31:00Z"},
		{"window=30d", "2026-11-01T10:30:20Z", "2026-12-01T10:31:00Z"},
		{"window=7d", "2026-11-24T10:30:20Z", "2026-12-01T10:31:00Z"},
		{"window=32d", "", ""},
		{"window=-1h", "", ""},
		{"from=2026-11-30T00:00:00Z&to=2026-12-01T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"from=2026-11-30T00:00:00Z", "2026-11-30T00:00:00Z", "2026-12-01T10:31:00Z"},
		{"from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "", ""},
		{"from=yesterday", "", ""},
		{"window=1h&from=2026-11-30T00:00:00Z", "", ""},
	} {
		q, _ := url.ParseQuery(tc.query)
		from, to, err := ledgerWindowOf(q, at)
		if tc.from == "" {
			if err == nil {
				t.Errorf("%q: no error", tc.query)
			}
			continue
		}
		if err != nil || from.Format(time.RFC3339) != tc.from || to.Format(time.RFC3339) != tc.to {
			t.Errorf("%q: %v to %v (%v), want %s to %s", tc.query, from, to, err, tc.from, tc.to)
		}
	}
}
