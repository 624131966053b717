// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"go.uber.org/zap"
)

// journaledGatewayWithoutBook starts a gateway's books as a process of a
// config without clients or spend cap does: a ledger, no spend book.
func journaledGatewayWithoutBook(t *testing.T, st *certmagic.FileStorage, clk clock.Clock) *Gateway {
	t.Helper()
	g := &Gateway{Name: "gw", logger: zap.NewNop(), life: lifetime{storage: st, ownsBooks: true}, clock: clk}
	g.money.Ledger = books.Open(g.booksConfig())
	if g.money.Ledger.Journal() == nil {
		t.Fatal("no journal")
	}
	t.Cleanup(g.money.Ledger.Journal().Close)
	return g
}

// storedSpend is what a new process's stored book says was spent on the
// day of at, and whether it is unknown.
func storedSpend(t *testing.T, st *certmagic.FileStorage, at time.Time) (float64, bool) {
	t.Helper()
	b := loadStoredBook(t, st, clock.System)
	total, _ := b.Spent("", at)
	return total.DayUSD, b.Unknown() != nil
}

// A process killed after two failed writes in a row leaves two segments
// that end torn, the second holding nothing else: the next process
// empties every segment after the last record it read, so that none of
// its records is appended to a torn line.
func TestJournalEmptiesTheTornSegmentsAfterTheLast(t *testing.T) {
	clk := fakeClock(t)
	st := &certmagic.FileStorage{Path: t.TempDir()}
	dir := books.JournalDir(st, "gw")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	first := `{"seq":1,"k":"r","t":1800000000000000000,"p":1,"o":1,"usd":0.5}` + "\n" + `{"seq":2,"k":"r","t":18000`
	if err := os.WriteFile(filepath.Join(dir, journal.SegmentName(1)), []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, journal.SegmentName(3)), []byte(`{"seq":3,"k":"r","t":18000`), 0o600); err != nil {
		t.Fatal(err)
	}
	g := journaledGateway(t, st, clk)
	at := clk.Now()
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}, at) // seq 2
	g.money.Ledger.Journal().Compact()                                                // the next segment: 3
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.125}, at)
	again := journaledGateway(t, st, clk)
	if total, _, usd, _, _ := booksOf(again, at); total != 0.875 || usd != 0.875 || again.money.Spend.Unknown() != nil {
		t.Errorf("after a kill: spend %v, ledger %v USD, unknown %+v; want 0.875, known", total, usd, again.money.Spend.Unknown())
	}
}

// A book that joins the journal (a reload gave the gateway clients) takes
// the records its snapshot lacks, and counts the requests after it as
// they come: none is counted twice. (That it reads the segments outside
// the journal's lock, while the config still serving journals its
// requests, is module/journal's TestJoinReadsOutsideTheLock.)
func TestJournalJoinsABook(t *testing.T) {
	clk := fakeClock(t)
	st := &certmagic.FileStorage{Path: t.TempDir()}
	g := journaledGateway(t, st, clk)
	at := clk.Now()
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5}, at)
	book := books.LoadSpendBook(context.Background(), st, "gw", clock.System, zap.NewNop())
	g.money.Spend = book
	g.money.Ledger.Join(g.booksConfig())
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}, at)
	if total, _ := book.Spent("", at); total.DayUSD != 0.75 {
		t.Errorf("the book that joined: %v USD, want 0.75 (0.5 read back, 0.25 counted as it came)", total.DayUSD)
	}
	if total, _, usd, _, _ := booksOf(journaledGateway(t, st, clk), at); total != 0.75 || usd != 0.75 {
		t.Errorf("after a kill: spend %v, ledger %v USD; want 0.75", total, usd)
	}
}

// A damaged segment makes the spend unknown wherever it is found: by a
// registry's book, by a book that joins, and without a book, in the book
// stored for the next config that has one.
func TestJournalDamageMakesEveryBookUnknown(t *testing.T) {
	damaged := `{"seq":1,"k":"r","t":1800000000000000000,"c":"team","p":1,"o":1,"usd":0.5}` + "\n" + "\x00\x00garbage\n" +
		`{"seq":3,"k":"r","t":1800000000000000000,"c":"team","p":1,"o":1,"usd":0.25}` + "\n"
	damage := func(t *testing.T, st *certmagic.FileStorage) {
		t.Helper()
		dir := books.JournalDir(st, "gw")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, journal.SegmentName(1)), []byte(damaged), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a registry's book", func(t *testing.T) {
		st := &certmagic.FileStorage{Path: t.TempDir()}
		damage(t, st)
		g := journaledGatewayAs(t, st, fakeClock(t), false)
		if total, _ := g.money.Spend.Spent("", g.clock.Now()); total.DayUSD != 0.75 || g.money.Spend.Unknown() == nil {
			t.Errorf("spend %v, unknown %+v; want 0.75, unknown", total.DayUSD, g.money.Spend.Unknown())
		}
	})
	t.Run("a book that joins", func(t *testing.T) {
		clk := fakeClock(t)
		st := &certmagic.FileStorage{Path: t.TempDir()}
		g := journaledGateway(t, st, clk)
		g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5}, clk.Now())
		f, err := os.OpenFile(filepath.Join(g.money.Ledger.Journal().Dir(), journal.SegmentName(1)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString("\x00\x00garbage\n")
		_ = f.Close()
		book := books.LoadSpendBook(context.Background(), nil, "gw", clock.System, zap.NewNop())
		g.money.Spend = book
		g.money.Ledger.Join(g.booksConfig())
		if total, _ := book.Spent("", clk.Now()); total.DayUSD != 0.5 || book.Unknown() == nil {
			t.Errorf("spend %v, unknown %+v; want 0.5, unknown", total.DayUSD, book.Unknown())
		}
	})
	t.Run("no book", func(t *testing.T) {
		st := &certmagic.FileStorage{Path: t.TempDir()}
		damage(t, st)
		g := journaledGatewayWithoutBook(t, st, fakeClock(t))
		if usd, unknown := storedSpend(t, st, g.clock.Now()); usd != 0.75 || !unknown {
			t.Errorf("the stored book: %v USD, unknown %v; want 0.75, unknown", usd, unknown)
		}
	})
}

// The segments go once both books' snapshots include them. Without a
// book, the spend of the journal is folded into the stored book at start,
// and what comes after stays until its month is over: a config that gets
// a book later counts it.
func TestJournalKeepsTheSpendNoBookIncludes(t *testing.T) {
	clk := fakeClock(t)
	clk.Set(time.Now().Truncate(time.Second)) // the segments' times are the file system's
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	at := clk.Now()
	g := journaledGateway(t, st, clk)
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5}, at)
	if err := g.money.Spend.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}, at) // after the spend's snapshot
	// killed; the next config has no clients and no spend cap
	g = journaledGatewayWithoutBook(t, st, clk)
	if usd, _ := storedSpend(t, st, at); usd != 0.75 {
		t.Errorf("the stored book after a start without one: %v USD, want 0.75", usd)
	}
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.125}, at) // in no book
	save := func(g *Gateway) {
		t.Helper()
		covered, ok := g.money.Ledger.Save(ctx, at, clk.Now())
		if !ok {
			t.Fatal("ledger not saved")
		}
		g.money.Ledger.Journal().SavedLedger(covered)
		g.money.Ledger.Journal().Compact()
	}
	segments := func() int {
		m, _ := filepath.Glob(filepath.Join(books.JournalDir(st, "gw"), "*"+journal.SegmentSuffix))
		return len(m)
	}
	save(g)
	if n := segments(); n != 2 {
		t.Errorf("%d segments, want 2: the open one, and the one of the spend in no book", n)
	}
	// killed; the next config has a book again
	if total, _, usd, _, _ := booksOf(journaledGateway(t, st, clk), at); total != 0.875 || usd != 0.875 {
		t.Errorf("after a kill: spend %v, ledger %v USD; want 0.875", total, usd)
	}
	// and the one after none; a month later the spend in no book counts no
	// more: its segments go
	g = journaledGatewayWithoutBook(t, st, clk)
	g.money.Charge(nil, journal.Charge{Prompt: 1, Completion: 1, CloudUSD: 0.125}, at)
	save(g)
	if n := segments(); n != 2 {
		t.Errorf("%d segments, want 2: the open one, and the one of the spend in no book", n)
	}
	clk.Set(time.Date(at.UTC().Year(), at.UTC().Month()+1, 1, 1, 0, 0, 0, time.UTC))
	save(g)
	if n := segments(); n != 1 {
		t.Errorf("a month later: %d segments, want the open one", n)
	}
}
