// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
	"go.uber.org/zap"
)

// spend is cloud spend in USD by UTC day and month.
type spend struct {
	Day      string  `json:"day"`   // 2006-01-02
	Month    string  `json:"month"` // 2006-01
	DayUSD   float64 `json:"day_usd"`
	MonthUSD float64 `json:"month_usd"`
}

// roll starts a new day or month when t is in one. Within the same day it
// formats nothing: every request reads the spend.
func (s *spend) roll(t time.Time) {
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

// spendBook is a gateway's cloud spend, in all and per client. It lasts
// across config reloads (kept by gateway name) and restarts (saved in
// Caddy's storage).
type spendBook struct {
	name string // in storage: the gateway's name, and with a registry the Caddy instance's ID
	// one save at a time: the one that writes last took the newest
	// snapshot (a config stopping and the next one's ticker may meet)
	saveMu  sync.Mutex
	mu      sync.Mutex
	total   spend
	clients map[string]*spend
	dirty   bool
	version uint64 // counts the additions, for the registry's copy
	warned  string // the day the spend cap's warning was logged
	// with a registry: what the fleet's other processes spent
	others atomic.Pointer[fleetSpend]
	// what the requests in flight on cloud targets reserved
	holds  spendHolds
	stored bool // in Caddy's storage, not in a registry
	// the last record of the journal the stored snapshot includes, and
	// the journal, when there is one (see module/journal)
	savedSeq uint64
	journal  atomic.Pointer[journal.Journal]
	// with a registry: the journal read at start, until the registry
	// says what its books include (see replayFleetBook)
	pending *pendingReplay
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
var spendBooks = reload.NewPool[*spendBook]()

// storedSpendBook returns a gateway's book kept in Caddy's storage,
// loading it from there the first time in this process.
func storedSpendBook(ctx caddy.Context, gateway string, c clock.Clock, logger *zap.Logger) *spendBook {
	return spendBooks.Keep(gateway, func() *spendBook { return loadSpendBook(ctx, gateway, c, logger) })
}

// memorySpendBook returns a book the process keeps in memory only: its
// own in a registry (see fleet_spend.go), or a book of a config that is
// only validated.
func memorySpendBook(gateway string, c clock.Clock) *spendBook {
	return spendBooks.Keep(gateway, func() *spendBook {
		return &spendBook{name: gateway, clients: map[string]*spend{}, clock: c}
	})
}

// loadSpendBook makes a gateway's stored book, from storage.
func loadSpendBook(ctx caddy.Context, gateway string, c clock.Clock, logger *zap.Logger) *spendBook {
	b := &spendBook{name: gateway, clients: map[string]*spend{}, stored: true, clock: c}
	if st := ctx.Storage(); st != nil {
		if err := b.load(ctx, st, gateway); err != nil {
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
			if err := b.save(ctx, st, gateway); err != nil {
				logger.Error("saving cloud spend", zap.Error(err))
			}
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
func (b *spendBook) load(ctx context.Context, st certmagic.Storage, gateway string) error {
	raw, err := st.Load(ctx, spendKey(gateway))
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
		b.clients[name] = &spend{Day: s.Day, Month: s.Month, DayUSD: s.DayUSD, MonthUSD: s.MonthUSD}
	}
	b.savedSeq = doc.JournalSeq
	if doc.Unknown != nil {
		b.unknown.Store(doc.Unknown)
	}
	return nil
}

// setUnknown closes cloud targets to what the book bounds (the clients'
// budgets, the spend cap) until an operator accepts it as it is.
func (b *spendBook) setUnknown(why, setAside string, logger *zap.Logger, gateway string) {
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

// accept counts on from what the book knows, and reports what the state
// was.
func (b *spendBook) accept() *adminapi.SpendUnknown {
	u := b.unknown.Swap(nil)
	b.mu.Lock()
	b.keep, b.dirty = false, true
	b.mu.Unlock()
	return u
}

func spendKey(gateway string) string { return "hybrid_llm/spend/" + gateway + ".json" }

// spendDoc is a book as stored.
type spendDoc struct {
	Total   spend            `json:"total"`
	Clients map[string]spend `json:"clients"`
	// the last record of the journal the book includes (see journal_books.go)
	JournalSeq uint64 `json:"journal_seq,omitempty"`
	// set until an operator accepts a book that could not be read
	Unknown *adminapi.SpendUnknown `json:"unknown,omitempty"`
}

// add records usd spent on the cloud at t, by a client (empty: none).
func (b *spendBook) add(client string, usd float64, t time.Time) {
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
			s = new(spend)
			b.clients[client] = s
		}
		s.roll(t)
		s.DayUSD += usd
		s.MonthUSD += usd
	}
	b.dirty = true
	b.version++
}

// spent returns what the gateway and a client spent today and this month:
// with a registry, on all the fleet's processes.
func (b *spendBook) spent(client string, t time.Time) (total, cl spend) {
	b.mu.Lock()
	b.total.roll(t)
	total = b.total
	s := b.clients[client]
	if s != nil {
		s.roll(t)
		cl = *s
	}
	b.mu.Unlock()
	if o := b.others.Load(); o != nil {
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

// save writes the book to storage if it changed; with a journal, it
// then includes every record so far.
func (b *spendBook) save(ctx context.Context, st certmagic.Storage, gateway string) error {
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
	doc := spendDoc{Total: b.total, Clients: make(map[string]spend, len(b.clients)), JournalSeq: seq, Unknown: b.unknown.Load()}
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
	if err := st.Store(ctx, spendKey(gateway), raw); err != nil {
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

// spendUnknownRetry is the Retry-After of a request refused the cloud
// while the spend is unknown: an operator's decision has no set time.
const spendUnknownRetry = 5 * time.Minute

// spendSaveInterval is how often a changed book is written to storage.
const spendSaveInterval = 5 * time.Second

// keepSaving writes the gateway's book to storage while the config runs,
// and once more when it stops.
func (g *Gateway) keepSaving(ctx caddy.Context) {
	st := ctx.Storage()
	if st == nil {
		return
	}
	// at the end: the next config's gateway, if any, carries on from the
	// same book; Cleanup saves it too, before the process may exit
	loop.Loop{Name: "spend saver", Every: spendSaveInterval, Last: g.saveSpend, Logger: g.logger}.Go(ctx, nil, func(ctx context.Context) {
		if err := g.spend.save(ctx, st, g.spend.name); err != nil {
			g.logger.Error("saving cloud spend", zap.Error(err))
		}
	})
}

// saveSpend writes the gateway's stored book to storage, if it changed.
func (g *Gateway) saveSpend() {
	if g.spend == nil || !g.spend.stored || g.storage == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.spend.save(ctx, g.storage, g.spend.name); err != nil {
		g.logger.Error("saving cloud spend", zap.Error(err))
	}
}

// cloudClosed returns why cloud targets are closed to a request now (the
// gateway's daily spend cap is reached, or the client's budget is spent),
// and until when.
func (g *Gateway) cloudClosed(cl *client, t time.Time) (reason, time.Duration) {
	capped := g.CloudSpend != nil && g.CloudSpend.DailyUSD > 0
	if g.spend == nil || !capped && (cl == nil || cl.budgetMonth <= 0 && cl.budgetDay <= 0) {
		return "", 0 // nothing to check the spend against
	}
	if g.spend.unknown.Load() != nil {
		return because.SpendUnknown, spendUnknownRetry
	}
	name := ""
	if cl != nil {
		name = cl.name
	}
	total, s := g.spend.spent(name, t)
	if capped && total.DayUSD >= g.CloudSpend.DailyUSD {
		return because.SpendCap, untilTomorrow(t)
	}
	if cl == nil {
		return "", 0
	}
	if cl.budgetMonth > 0 && s.MonthUSD >= cl.budgetMonth {
		return because.Budget, untilNextMonth(t)
	}
	if cl.budgetDay > 0 && s.DayUSD >= cl.budgetDay {
		return because.Budget, untilTomorrow(t)
	}
	return "", 0
}

// spent records a request's cloud spend, and warns once a day when the
// gateway's spend passes the cap's warning share.
func (g *Gateway) spent(cl *client, usd float64, t time.Time) {
	if g.spend == nil || usd <= 0 {
		return
	}
	name := ""
	if cl != nil {
		name = cl.name
	}
	if cl != nil && !cl.known {
		name = "" // an identity's name, unbounded: counted in the total only
	}
	g.spend.add(name, usd, t)
	c := g.CloudSpend
	if c == nil || c.DailyUSD <= 0 {
		return
	}
	total, _ := g.spend.spent("", t)
	share := c.warnShare()
	g.spend.mu.Lock()
	warn := total.DayUSD >= share*c.DailyUSD && g.spend.warned != total.Day
	if warn {
		g.spend.warned = total.Day
	}
	g.spend.mu.Unlock()
	if warn {
		g.logger.Warn("cloud spend near the daily cap",
			zap.Float64("spent_usd", total.DayUSD), zap.Float64("daily_cap_usd", c.DailyUSD), zap.Float64("warn_share", share))
	}
}

// CloudSpend caps what all the gateway's cloud targets together may cost
// in a UTC day.
type CloudSpend struct {
	// The daily cap in USD. When it is reached, overflow and fallback to
	// cloud targets stop until the next UTC day: self-hosted targets keep
	// serving, and a request that finds no target gets 503 with
	// Retry-After.
	DailyUSD float64 `json:"daily_usd,omitempty"`

	// The share of the cap at which a warning is logged. Default: 0.8.
	WarnAt float64 `json:"warn_at,omitempty"`
}

func (c *CloudSpend) warnShare() float64 {
	if c.WarnAt > 0 {
		return c.WarnAt
	}
	return 0.8
}

// untilNextMonth is the time left in the UTC month.
func untilNextMonth(t time.Time) time.Duration {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(t)
}

// untilTomorrow is the time left in the UTC day.
func untilTomorrow(t time.Time) time.Duration {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC).Sub(t)
}
