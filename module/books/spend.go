// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// Spend is cloud spend in USD by UTC day and month.
type Spend struct {
	Day      string  `json:"day"`   // 2006-01-02
	Month    string  `json:"month"` // 2006-01
	DayUSD   float64 `json:"day_usd"`
	MonthUSD float64 `json:"month_usd"`
}

// roll starts a new day or month when t is in one. Within the same day it
// formats nothing: every request reads the spend.
func (s *Spend) roll(t time.Time) {
	t = t.UTC()
	y, m, d := t.Date()
	// isMonth and isDate know four-digit years only; for others the
	// formatted value decides
	if !isMonth(s.Month, y, m) {
		if v := t.Format("2006-01"); s.Month != v {
			s.Month, s.MonthUSD = v, 0
		}
	}
	if !isDate(s.Day, y, m, d) {
		if v := t.Format(time.DateOnly); s.Day != v {
			s.Day, s.DayUSD = v, 0
		}
	}
}

// isDate reports whether v is the date y-m-d as time.DateOnly writes it.
func isDate(v string, y int, m time.Month, d int) bool {
	return len(v) == len(time.DateOnly) && v[7] == '-' && isMonth(v[:7], y, m) && isDigits(v[8:], d)
}

// isMonth reports whether v is year y and month m as "2006-01" writes them.
func isMonth(v string, y int, m time.Month) bool {
	return len(v) == 7 && v[4] == '-' && isDigits(v[:4], y) && isDigits(v[5:], int(m))
}

// isDigits reports whether v is n in decimal, zero-padded to v's length.
func isDigits(v string, n int) bool {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] != byte('0'+n%10) {
			return false
		}
		n /= 10
	}
	return n == 0
}

// SpendBook is a gateway's cloud spend, in all and per client. It lasts
// across config reloads (kept by gateway name) and restarts (saved in
// Caddy's storage, or published to a registry).
type SpendBook struct {
	name string // in storage: the gateway's name, and with a registry the Caddy instance's ID
	// one save at a time: the one that writes last took the newest
	// snapshot (a config stopping and the next one's ticker may meet)
	saveMu  sync.Mutex
	mu      sync.Mutex
	total   Spend
	clients map[string]*Spend
	dirty   bool
	warned  string // the day the spend cap's warning was logged
	// with a registry: what the fleet's other processes spent; the
	// additions counted, for the registry's copy; the journal read at
	// start, until the registry says what its books include (see
	// ReplayPending)
	fleet struct {
		others  atomic.Pointer[others]
		version uint64 // under mu
		pending *pendingReplay
	}
	// what the requests in flight on cloud targets reserved
	holds  Holds
	stored bool // in Caddy's storage, not in a registry
	// the last record of the journal the stored snapshot includes, and
	// the journal, when there is one (see module/journal)
	savedSeq uint64
	journal  atomic.Pointer[journal.Journal]
	// set when the book in storage could not be read: cloud targets
	// stay closed to what it bounds until an operator accepts
	unknown atomic.Pointer[adminapi.SpendUnknown]
	// the stored book could not be read at all: it is not overwritten
	// until an operator accepts
	keep  bool
	clock clock.Clock // of adminapi.SpendUnknown.Since
}

// spendBooks are the gateways' books, by name, for the life of the
// process: a gateway that a config drops and a later one adds back goes
// on from its book, never from a second copy of it.
var spendBooks = reload.NewPool[*SpendBook]()

// StoredSpendBook returns a gateway's book kept in Caddy's storage,
// loading it from there the first time in this process.
func StoredSpendBook(ctx context.Context, st certmagic.Storage, gateway string, c clock.Clock, logger *zap.Logger) *SpendBook {
	return spendBooks.Keep(gateway, func() *SpendBook { return LoadSpendBook(ctx, st, gateway, c, logger) })
}

// MemorySpendBook returns a book the process keeps in memory only: its
// own in a registry (see fleet.go), or a book of a config that is only
// validated.
func MemorySpendBook(name string, c clock.Clock) *SpendBook {
	return spendBooks.Keep(name, func() *SpendBook { return newSpendBook(name, c) })
}

// NewSpendBook returns a book of memory only, kept nowhere: for a
// gateway's tests.
func NewSpendBook(name string, c clock.Clock) *SpendBook { return newSpendBook(name, c) }

func newSpendBook(name string, c clock.Clock) *SpendBook {
	return &SpendBook{name: name, clients: map[string]*Spend{}, clock: c}
}

// LoadSpendBook makes a gateway's stored book, from storage (st nil:
// none). A book that cannot be read is set aside, and the spend unknown.
func LoadSpendBook(ctx context.Context, st certmagic.Storage, gateway string, c clock.Clock, logger *zap.Logger) *SpendBook {
	b := newSpendBook(gateway, c)
	b.stored = true
	if st == nil {
		return b
	}
	if err := b.load(ctx, st); err != nil {
		key, aside := spendKey(gateway), ""
		var bad *unreadableSpend
		if errors.As(err, &bad) {
			// set aside, never overwritten
			aside = key + ".corrupt-" + strconv.FormatInt(c.Now().Unix(), 10)
			if serr := st.Store(ctx, aside, bad.raw); serr == nil {
				_ = st.Delete(ctx, key)
			} else {
				aside = ""
			}
		}
		b.keep = aside == ""
		b.setUnknown("the cloud spend in storage ("+key+") could not be read: "+err.Error(), aside, logger, gateway)
		// at once: a crash before the next save would forget it
		if err := b.Save(ctx, st); err != nil {
			logger.Error("saving cloud spend", zap.Error(err))
		}
	}
	return b
}

// unreadableSpend is a stored book that was read but is not one.
type unreadableSpend struct {
	raw []byte
	err error
}

func (e *unreadableSpend) Error() string { return e.err.Error() }

// load reads a book saved in storage, if there is one.
func (b *SpendBook) load(ctx context.Context, st certmagic.Storage) error {
	raw, err := st.Load(ctx, spendKey(b.name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var doc spendDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return &unreadableSpend{raw: raw, err: err}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total = doc.Total
	for name, s := range doc.Clients {
		b.clients[name] = &Spend{Day: s.Day, Month: s.Month, DayUSD: s.DayUSD, MonthUSD: s.MonthUSD}
	}
	b.savedSeq = doc.JournalSeq
	if doc.Unknown != nil {
		b.unknown.Store(doc.Unknown)
	}
	return nil
}

// setUnknown closes cloud targets to what the book bounds (the clients'
// budgets, the spend cap) until an operator accepts it as it is.
func (b *SpendBook) setUnknown(why, setAside string, logger *zap.Logger, gateway string) {
	u := &adminapi.SpendUnknown{Since: b.clock.Now().UTC(), Why: why, SetAsideAs: setAside}
	b.unknown.Store(u)
	b.mu.Lock()
	b.dirty = true // the state persists
	b.mu.Unlock()
	logger.Error("cloud spend unknown: cloud targets are closed to the clients with a budget, and to all under a spend cap, "+
		"until an operator decides; check what was set aside, then count on from what is known with "+
		"curl -X POST -H 'Content-Type: application/json' -d '{\"gateway\":\""+gateway+"\"}' http://<admin>/hybrid_llm/spend/accept",
		zap.String("gateway", gateway), zap.String("why", why), zap.String("set_aside_as", setAside))
}

// Unknown is why the book is not known for sure, nil when it is.
func (b *SpendBook) Unknown() *adminapi.SpendUnknown { return b.unknown.Load() }

// Accept counts on from what the book knows, and reports what the state
// was.
func (b *SpendBook) Accept() *adminapi.SpendUnknown {
	u := b.unknown.Swap(nil)
	b.mu.Lock()
	b.keep, b.dirty = false, true
	b.mu.Unlock()
	return u
}

// Stored reports whether the book is kept in Caddy's storage (not in a
// registry, nor in memory only).
func (b *SpendBook) Stored() bool { return b.stored }

// Holds are what the requests in flight reserved of the book.
func (b *SpendBook) Holds() *Holds { return &b.holds }

// WarnOnce reports whether the spend cap's warning is due for day: the
// first time it is asked for that day.
func (b *SpendBook) WarnOnce(day string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.warned == day {
		return false
	}
	b.warned = day
	return true
}

func spendKey(gateway string) string { return "hybrid_llm/spend/" + gateway + ".json" }

// spendDoc is a book as stored.
type spendDoc struct {
	Total   Spend            `json:"total"`
	Clients map[string]Spend `json:"clients"`
	// the last record of the journal the book includes (see journal.go)
	JournalSeq uint64 `json:"journal_seq,omitempty"`
	// set until an operator accepts a book that could not be read
	Unknown *adminapi.SpendUnknown `json:"unknown,omitempty"`
}

// Add records usd spent on the cloud at t, by a client (empty: none).
func (b *SpendBook) Add(client string, usd float64, t time.Time) {
	if usd <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total.roll(t)
	b.total.DayUSD += usd
	b.total.MonthUSD += usd
	if client != "" {
		s := b.clients[client]
		if s == nil {
			s = new(Spend)
			b.clients[client] = s
		}
		s.roll(t)
		s.DayUSD += usd
		s.MonthUSD += usd
	}
	b.dirty = true
	b.fleet.version++
}

// Spent returns what the gateway and a client spent today and this month:
// with a registry, on all the fleet's processes.
func (b *SpendBook) Spent(client string, t time.Time) (total, cl Spend) {
	b.mu.Lock()
	b.total.roll(t)
	total = b.total
	s := b.clients[client]
	if s != nil {
		s.roll(t)
		cl = *s
	}
	b.mu.Unlock()
	if o := b.fleet.others.Load(); o != nil {
		o.add(&total, "")
		if client != "" {
			if s == nil {
				cl.Day, cl.Month = total.Day, total.Month
			}
			o.add(&cl, client)
		}
	}
	return total, cl
}

// Save writes the book to storage if it changed; with a journal, it
// then includes every record so far.
func (b *SpendBook) Save(ctx context.Context, st certmagic.Storage) error {
	b.saveMu.Lock()
	defer b.saveMu.Unlock()
	// the copy, at one record of the journal
	j := b.journal.Load()
	var seq uint64
	if j != nil {
		j.Lock()
		seq = j.SeqLocked()
	}
	b.mu.Lock()
	dirty, keep := b.dirty, b.keep
	doc := spendDoc{Total: b.total, Clients: make(map[string]Spend, len(b.clients)), JournalSeq: seq, Unknown: b.unknown.Load()}
	if dirty && !keep {
		for name, s := range b.clients {
			doc.Clients[name] = *s
		}
		b.dirty = false
	}
	b.mu.Unlock()
	if j != nil {
		j.Unlock()
	}
	if keep {
		return nil
	}
	if !dirty {
		if j != nil {
			j.SavedSpend(seq) // what is stored has not changed since
		}
		return nil
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if err := st.Store(ctx, spendKey(b.name), raw); err != nil {
		b.mu.Lock()
		b.dirty = true
		b.mu.Unlock()
		return err
	}
	if j != nil {
		j.SavedSpend(seq)
	}
	return nil
}
