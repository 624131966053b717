// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"go.uber.org/zap"
)

// journaledGateway starts a gateway's books as a process does: the
// snapshots in st read back, then the journal's records after them.
func journaledGateway(t *testing.T, st *certmagic.FileStorage, clk clock.Clock) *Gateway {
	t.Helper()
	return journaledGatewayAs(t, st, clk, true)
}

// journaledGatewayAs is journaledGateway with the spend book in storage,
// or (not stored) in a registry: a book of the process's own.
func journaledGatewayAs(t *testing.T, st *certmagic.FileStorage, clk clock.Clock, stored bool) *Gateway {
	t.Helper()
	g := &Gateway{Name: "gw", logger: zap.NewNop(), life: lifetime{storage: st, ownsBooks: true}, clock: clk}
	if stored {
		g.money.Spend = loadStoredBook(t, st, clk)
	} else {
		g.money.Spend = books.NewSpendBook("gw", clk)
		g.Registry = &RegistryConfig{}
	}
	g.money.Ledger = books.Open(g.booksConfig())
	if g.money.Ledger.Journal() == nil {
		t.Fatal("no journal")
	}
	t.Cleanup(g.money.Ledger.Journal().Close)
	g.money.Spend.ReplayPending(func(string) uint64 { return 0 }, g.logger) // as Provision does, with a registry that holds no book
	return g
}

// loadStoredBook reads the gateway's stored spend book as a process
// does, and fails the test when what is stored is not a book.
func loadStoredBook(t *testing.T, st *certmagic.FileStorage, clk clock.Clock) *books.SpendBook {
	t.Helper()
	b := books.LoadSpendBook(context.Background(), st, "gw", clk, zap.NewNop())
	if u := b.Unknown(); u != nil && strings.HasPrefix(u.Why, "the cloud spend in storage") {
		t.Fatalf("the stored book could not be read: %s", u.Why)
	}
	return b
}

// booksOf is what the books say: the spend book's total and team's
// today, the ledger's cloud USD, tokens and covered seconds.
func booksOf(g *Gateway, at time.Time) (total, team, ledgerUSD float64, tokens int64, covered time.Duration) {
	tot, tm := g.money.Spend.Spent("team", at)
	w := g.money.Ledger.Window(at.Add(-time.Hour), at.Add(time.Minute))
	for _, s := range w.Samples {
		covered += s.Dur
	}
	return tot.DayUSD, tm.DayUSD, w.CloudUSD, w.Prompt + w.Completion, covered
}

// A process that stops without a word (SIGKILL) loses nothing the
// journal holds: the next one reads the snapshots, then replays the
// records after them, once, however often it happens.
func TestJournalReplaysPastTheSnapshots(t *testing.T) {
	clk := fakeClock(t)
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	g := journaledGateway(t, st, clk)
	team := &clients.Caller{Name: "team", Known: true}
	start := clk.Now()
	g.money.Ledger.Tick(start)
	g.money.Charge(team, journal.Charge{Client: "team", Prompt: 100, Completion: 10, CloudUSD: 0.5}, start)
	g.money.Charge(team, journal.Charge{Client: "team", SelfHosted: true, Prompt: 1000, Completion: 100}, start)
	clk.Set(start.Add(5 * time.Second))
	g.money.Ledger.Tick(clk.Now())
	// the snapshots include these
	if err := g.money.Spend.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.money.Ledger.Save(ctx, start, clk.Now()); !ok {
		t.Fatal("ledger not saved")
	}
	// and not these
	g.money.Charge(nil, journal.Charge{Prompt: 7, Completion: 3, CloudUSD: 0.25}, clk.Now())
	g.money.Charge(team, journal.Charge{Client: "team", Prompt: 1, Completion: 1, CloudUSD: 0.125, Estimated: true}, clk.Now())
	g.money.Charge(nil, journal.Charge{Shadow: true, Prompt: 5, Completion: 5, CloudUSD: 0.1}, clk.Now()) // a mirror copy
	clk.Set(start.Add(7 * time.Second))
	g.money.Ledger.Tick(clk.Now())
	at := clk.Now()
	want := func(what string, g *Gateway) {
		t.Helper()
		total, tm, usd, tokens, covered := booksOf(g, at)
		if total != 0.875 || tm != 0.625 || usd != 0.875 || tokens != 1222 || covered != 7*time.Second {
			t.Errorf("%s: spend %v (team %v), ledger %v USD, %d tokens, %v covered; want 0.875 (0.625), 0.875, 1222, 7s",
				what, total, tm, usd, tokens, covered)
		}
		if v := g.money.Ledger.Window(at.Add(-time.Hour), at.Add(time.Minute)).Shadow; v.Requests != 1 || v.PromptTokens != 5 || v.USD != 0.1 {
			t.Errorf("%s: mirror copies %+v, want one of 5+5 tokens, 0.1 USD", what, v)
		}
	}
	want("before the kill", g)
	// killed: nothing more is saved
	want("after a kill", journaledGateway(t, st, clk))
	want("after a second kill", journaledGateway(t, st, clk))
}

// A segment with a line that cannot be read is set aside, never
// deleted; its readable records count, and the spend, no longer known
// for sure, keeps cloud closed until an operator accepts it.
func TestJournalSetsADamagedSegmentAside(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	dir := books.JournalDir(st, "gw")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	damaged := `{"seq":1,"k":"r","t":1800000000000000000,"c":"team","p":1,"o":1,"usd":0.5}` + "\n" + "\x00\x00garbage\n" +
		`{"seq":3,"k":"r","t":1800000000000000000,"c":"team","p":1,"o":1,"usd":0.25}` + "\n"
	seg := filepath.Join(dir, journal.SegmentName(1))
	if err := os.WriteFile(seg, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	g := journaledGateway(t, st, fakeClock(t))
	aside, _ := filepath.Glob(seg + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("set aside: %q", aside)
	}
	if raw, _ := os.ReadFile(aside[0]); string(raw) != damaged {
		t.Errorf("what was set aside: %q", raw)
	}
	if total, _, usd, _, _ := booksOf(g, g.clock.Now()); total != 0.75 || usd != 0.75 {
		t.Errorf("the readable records: spend %v, ledger %v USD; want 0.75", total, usd)
	}
	team := &clients.Caller{Name: "team", Known: true, BudgetDay: 10}
	if why, _ := g.money.CloudClosed(team, g.clock.Now()); why != because.SpendUnknown {
		t.Errorf("cloud for a client with a budget: %q, want %q", why, because.SpendUnknown)
	}
	if why, _ := g.money.CloudClosed(&clients.Caller{Name: "free", Known: true}, g.clock.Now()); why != "" {
		t.Errorf("cloud for a client without a budget: %q", why)
	}
	// killed before an operator decided: still unknown, counted once
	g = journaledGateway(t, st, fakeClock(t))
	if total, _, usd, _, _ := booksOf(g, g.clock.Now()); total != 0.75 || usd != 0.75 || g.money.Spend.Unknown() == nil {
		t.Errorf("after a kill: spend %v, ledger %v USD, unknown %+v; want 0.75, 0.75, unknown", total, usd, g.money.Spend.Unknown())
	}
	if u := g.money.Spend.Accept(); u == nil || !strings.Contains(u.SetAsideAs, ".corrupt-") {
		t.Errorf("accepted: %+v", u)
	}
	if why, _ := g.money.CloudClosed(team, g.clock.Now()); why != "" {
		t.Errorf("after the accept: %q", why)
	}
}

// A save starts a new segment, and the segments every snapshot includes
// go; what the journal keeps and the snapshots still add up.
func TestJournalCompacts(t *testing.T) {
	clk := fakeClock(t)
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	g := journaledGateway(t, st, clk)
	j := g.money.Ledger.Journal()
	segments := func() int {
		m, _ := filepath.Glob(filepath.Join(j.Dir(), "*"+journal.SegmentSuffix))
		return len(m)
	}
	start := clk.Now()
	for i := range 3 {
		g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5}, start)
		j.Compact() // nothing saved yet: every segment stays
		if n := segments(); n != i+2 {
			t.Fatalf("unsaved: %d segments, want %d", n, i+2)
		}
	}
	if err := g.money.Spend.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	seq, ok := g.money.Ledger.Save(ctx, start, start)
	if !ok || seq != 3 {
		t.Fatalf("saved at %d (%v)", seq, ok)
	}
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}, start)
	j.SavedLedger(seq)
	j.Compact()
	if n := segments(); n != 2 { // the one with the last record, and the new one
		t.Errorf("after the saves: %d segments, want 2", n)
	}
	if total, _, usd, tokens, _ := booksOf(journaledGateway(t, st, clk), start); total != 1.75 || usd != 1.75 || tokens != 8 {
		t.Errorf("after a kill: spend %v, ledger %v USD, %d tokens; want 1.75, 1.75, 8", total, usd, tokens)
	}
}

// With a registry, the journal marks what each publication of the book
// includes: a process killed after one starts its successor's book with
// the charges after it, and only those, however the segments were
// compacted since.
func TestJournalMarksWhatWasPublished(t *testing.T) {
	clk := fakeClock(t)
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	g := journaledGatewayAs(t, st, clk, false)
	at := clk.Now()
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5}, at)
	_, _, seq := g.money.Spend.Publication("gw", at)
	g.money.Spend.MarkPublished(seq)
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}, at)
	// killed: the successor's own book has what was not published
	g = journaledGatewayAs(t, st, clk, false)
	if total, _ := g.money.Spend.Spent("", at); total.DayUSD != 0.25 {
		t.Fatalf("after a kill: the new book has %v USD, want the unpublished 0.25", total.DayUSD)
	}
	// it publishes, and the segments go: the mark stays
	_, _, seq = g.money.Spend.Publication("gw", at)
	g.money.Spend.MarkPublished(seq)
	covered, ok := g.money.Ledger.Save(ctx, at, at)
	if !ok {
		t.Fatal("ledger not saved")
	}
	g.money.Ledger.Journal().SavedLedger(covered)
	g.money.Ledger.Journal().Compact()
	g = journaledGatewayAs(t, st, clk, false)
	if total, _ := g.money.Spend.Spent("", at); total.DayUSD != 0 {
		t.Errorf("after all was published and compacted: the new book has %v USD, want 0", total.DayUSD)
	}
}

// The journal's write per request: one line, one write(2), nothing
// allocated.
func BenchmarkJournalCharge(b *testing.B) {
	st := &certmagic.FileStorage{Path: b.TempDir()}
	g := &Gateway{Name: "gw", logger: zap.NewNop(), life: lifetime{storage: st}, clock: clock.System}
	g.money.Spend = books.LoadSpendBook(context.Background(), nil, "gw", g.clock, g.logger)
	g.money.Ledger = books.Open(g.booksConfig()) // memory only
	team := &clients.Caller{Name: "team", Known: true}
	c := journal.Charge{Client: "team", Prompt: 1234, Completion: 567, CloudUSD: 0.0012345}
	at := time.Now()
	for _, journaled := range []bool{false, true} {
		name := "memory only"
		if journaled {
			name = "journaled"
			g.life.ownsBooks = true
			g.money.Ledger = books.Open(g.booksConfig())
			defer g.money.Ledger.Journal().Close()
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.money.Charge(team, c, at)
			}
		})
	}
	if total, _ := g.money.Spend.Spent("", at); math.IsNaN(total.DayUSD) {
		b.Fatal("nan")
	}
}
