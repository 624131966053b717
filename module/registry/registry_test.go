// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"fmt"
	"strings"
	"testing"
)

const prefix = "/hybrid-llm/gw"

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		key, kind, name, err string
	}{
		{"/hybrid-llm/gw/groups/self", "groups", "self", ""},
		{"/hybrid-llm/gw/aliases/chat-main", "aliases", "chat-main", ""},
		{"/hybrid-llm/other/groups/self", "", "", "not under the prefix"},
		{"/hybrid-llm/gw/groups/", "", "", "want /hybrid-llm/gw/groups/<group>"},
		{"/hybrid-llm/gw/groups/a/b", "", "", "want"},
		{"/hybrid-llm/gw/models/x", "", "", `unknown kind "models"`},
	} {
		kind, name, err := ParseKey(prefix, tc.key)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.key, err, tc.err)
			}
			continue
		}
		if err != nil || string(kind) != tc.kind || name != tc.name {
			t.Errorf("%s: %s %s %v", tc.key, kind, name, err)
		}
	}
}

// A value is read strictly: what a typo or a wrong type would silently
// drop is refused with the reason.
func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct{ value, err string }{
		{`{"drained": "yes"}`, "cannot unmarshal string"},
		{`{"drain": true}`, `unknown field "drain"`},
		{`{"endpoints": [{"address": "10.0.0.5"}]}`, `endpoints[0].address "10.0.0.5": want host:port`},
		{`{"endpoints": [{"address": "a:1"}, {"address": "a:1"}]}`, "listed twice"},
		{`{"endpoints": [{"address": "a:1", "weight": -2}]}`, "weight -2: want 0 to 1000"},
		{`{} {}`, "more than one JSON value"},
		{``, "EOF"},
	} {
		if _, err := DecodeGroup([]byte(tc.value)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("group %q: %v, want %q", tc.value, err, tc.err)
		}
	}
	for _, tc := range []struct{ value, err string }{
		{`{}`, "want {\"weights\""},
		{`{"weights": {"a": 1.5}}`, "cannot unmarshal number 1.5"},
		{`{"weights": {"a": 5000}}`, "want 0 to 1000"},
	} {
		if _, err := DecodeAlias([]byte(tc.value)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("alias %q: %v, want %q", tc.value, err, tc.err)
		}
	}
}

// Changes apply on a copy: the snapshot handed out never moves; one at or
// before the snapshot's revision is in it already and is skipped; one
// refused leaves its key as it was.
func TestApply(t *testing.T) {
	s, rej := Load(prefix, 10, []Change{
		{Key: Key(prefix, KindGroup, "self"), Value: []byte(`{"endpoints":[{"address":"10.0.0.5:8000"}]}`), Revision: 7},
		{Key: Key(prefix, KindAlias, "chat"), Value: []byte(`{"weights":{"a":60,"b":40}}`), Revision: 9},
	}, nil)
	if len(rej) != 0 || len(s.Groups["self"].Endpoints) != 1 || s.Aliases["chat"].Weights["a"] != 60 {
		t.Fatalf("loaded %+v, refused %v", s, rej)
	}
	next, rej := s.Apply(prefix, 13, []Change{
		{Key: Key(prefix, KindGroup, "self"), Value: []byte(`{"drained":true}`), Revision: 9}, // already in s
		{Key: Key(prefix, KindAlias, "chat"), Value: []byte(`{"weights":{"a":"x"}}`), Revision: 11},
		{Key: Key(prefix, KindGroup, "cloud"), Value: []byte(`{"drained":true}`), Revision: 12},
		{Key: Key(prefix, KindGroup, "self"), Revision: 13}, // deleted
	})
	if len(rej) != 1 || rej[0].Key != Key(prefix, KindAlias, "chat") {
		t.Errorf("refused %v, want the alias's bad weights", rej)
	}
	if _, ok := next.Groups["self"]; ok || !next.Groups["cloud"].Drained || next.Aliases["chat"].Weights["a"] != 60 || next.Revision != 13 {
		t.Errorf("applied: %+v", next)
	}
	if len(s.Groups["self"].Endpoints) != 1 || s.Groups["cloud"].Drained || s.Revision != 10 {
		t.Errorf("the snapshot handed out moved: %+v", s)
	}
	// a full read with a bad value keeps the key's value from before
	again, rej := Load(prefix, 20, []Change{{Key: Key(prefix, KindAlias, "chat"), Value: []byte(`nope`)}}, next)
	if len(rej) != 1 || again.Aliases["chat"].Weights["b"] != 40 {
		t.Errorf("reloaded with a bad value: %+v, refused %v", again, rej)
	}
}

// The members' shares of a limit add up to it, never more, and differ by
// one at most; with more members than the limit, the last get none.
func TestShare(t *testing.T) {
	for _, tc := range []struct{ limit, n int }{{12, 1}, {12, 3}, {12, 5}, {3, 2}, {3, 3}, {2, 5}, {0, 2}} {
		sum, lo, hi := 0, tc.limit, 0
		for rank := range tc.n {
			s := Share(tc.limit, rank, tc.n)
			sum += s
			lo, hi = min(lo, s), max(hi, s)
		}
		if sum != tc.limit || hi-lo > 1 {
			t.Errorf("%d over %d: sum %d, from %d to %d", tc.limit, tc.n, sum, lo, hi)
		}
	}
	if Share(2, 4, 5) != 0 || Share(2, 0, 5) != 1 {
		t.Errorf("2 over 5: the first two get one each, the rest none")
	}
}

// A registry update of a group with 100 endpoints, decoded and applied to
// a new snapshot (go test -bench Apply100 ./module/registry/).
func BenchmarkApply100(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"endpoints":[`)
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"address":"10.0.%d.%d:8000","weight":%d,"drained":%v}`, i/250, i%250, i%7, i%10 == 0)
	}
	sb.WriteString(`]}`)
	value := []byte(sb.String())
	s := Empty()
	for i := range 50 {
		s.Aliases[fmt.Sprint("alias-", i)] = Alias{Weights: map[string]int{"a": 1}}
	}
	key := Key(prefix, KindGroup, "self")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		next, rej := s.Apply(prefix, int64(i+1), []Change{{Key: key, Value: value, Revision: int64(i + 1)}})
		if len(rej) != 0 || len(next.Groups["self"].Endpoints) != 100 {
			b.Fatal(rej)
		}
	}
}

// The spend another process publishes is read strictly too: a negative
// or non-date value would lift or lower every gateway's budgets.
func TestDecodeBookRefuses(t *testing.T) {
	ok := `{"gateway": "main", "total": {"day": "2026-12-01", "month": "2026-12", "day_usd": 1.5, "month_usd": 20}}`
	if _, err := DecodeBook([]byte(ok)); err != nil {
		t.Fatalf("good book refused: %v", err)
	}
	for _, tc := range []struct{ value, err string }{
		{`{"gateway": "main", "total": {"day": "2026-12-01", "month": "2026-12", "day_usd": -1, "month_usd": 0}}`, "not negative"},
		{`{"gateway": "main", "total": {"day": "yesterday", "month": "2026-12"}}`, `day "yesterday" is not a date`},
		{`{"gateway": "main", "total": {"day": "2026-12-01", "month": "12/2026"}}`, `month "12/2026"`},
		{`{"gateway": "main", "total": {"day": "2026-12-01", "month": "2026-12"}, "clients": {"a": {"day": "2026-12-01", "month": "2026-12", "day_usd": "1"}}}`, "cannot unmarshal string"},
	} {
		if _, err := DecodeBook([]byte(tc.value)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("book %q: %v, want %q", tc.value, err, tc.err)
		}
	}
}

// What the others spent counts for the day and the month it was spent in,
// for the same gateway only, and never the process's own book.
func TestSpentAddsTheOthers(t *testing.T) {
	s := Empty()
	day := func(d string, usd float64) Spend { return Spend{Day: d, Month: d[:7], DayUSD: usd, MonthUSD: usd * 10} }
	s.Spend["self.main"] = Book{Gateway: "main", Total: day("2026-12-01", 100)}
	s.Spend["b.main"] = Book{Gateway: "main", Total: day("2026-12-01", 2), Clients: map[string]Spend{"team-a": day("2026-12-01", 1)}}
	s.Spend["c.main"] = Book{Gateway: "main", Total: day("2026-11-30", 3), Clients: map[string]Spend{"team-a": day("2026-11-30", 3)}}
	s.Spend["d.other"] = Book{Gateway: "other", Total: day("2026-12-01", 50)}
	total, clients := s.Spent("main", "self.main", "2026-12-01", "2026-12")
	if total.DayUSD != 2 || total.MonthUSD != 20 {
		t.Errorf("total: %+v, want day 2 and month 20 (b only: c's book is November's)", total)
	}
	if a := clients["team-a"]; a.DayUSD != 1 || a.MonthUSD != 10 {
		t.Errorf("team-a: %+v, want day 1, month 10", a)
	}
	total, _ = s.Spent("main", "self.main", "2026-12-02", "2026-12")
	if total.DayUSD != 0 || total.MonthUSD != 20 {
		t.Errorf("the next day: %+v, want nothing for the day and b's 20 for the month", total)
	}
}
