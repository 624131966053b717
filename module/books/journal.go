// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"context"
	"net/url"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
)

// What the journal's records mean to the books, and how they are put
// back at start. A gateway's journal (module/journal) makes its books
// (the ledger and the cloud spend) durable per request: each finished
// request that counted tokens or cloud cost is appended to it as it
// enters the books (the gateway's charge), and once a second the
// ledger's demand of the minute (journalDemandLocked).
//
// The books' snapshots in Caddy's storage (the spend every 5 s, the
// ledger every minute) each say the last record they include; at start
// the snapshots are read, and the records after them replayed
// (startJournal). A segment is started at each start, each ledger save,
// each book that joins (see Join) and after a failed write; a segment
// whose records both snapshots include, the ledger's and the spend's, is
// deleted (journal.Compact). A segment with a line that cannot be read
// is set aside, and the spend is unknown until an operator accepts it.
// With a registry the spend is the registry's, and the journal marks
// what each publication of it includes (see fleet.go).
//
// It lives in Caddy's storage when that is a directory (file_system
// storage, Caddy's data directory by default), where the books' lock
// (module/proclock) makes this process its only writer.

// journalDemandLocked appends the demand of the buckets it changed in
// since the last time, as their totals so far. j is locked, and l.mu is
// held.
func (l *Ledger) journalDemandLocked(j *journal.Journal) {
	if l.lastAt.Equal(l.journaledAt) || l.lastAt.IsZero() {
		return
	}
	from := l.journaledAt
	if from.IsZero() {
		from = l.lastAt // the first time: the bucket of now
	}
	from = from.Truncate(BucketSize)
	l.journaledAt = l.lastAt
	n := len(l.buckets)
	var changed [4]*bucket // newest first; a tick spans one or two
	k := 0
	for i := 1; i <= n && k < len(changed); i++ {
		b := &l.buckets[(l.next-i+n)%n]
		if b.start.Before(from) {
			break
		}
		changed[k] = b
		k++
	}
	for k--; k >= 0; k-- {
		b := changed[k]
		j.AppendDemandLocked(journal.Demand{Bucket: b.start.Unix(), Dur: b.dur, SelfSecs: b.selfSecs, CloudGS: b.cloudGS, Peak: b.peak})
	}
}

// JournalDir is where a gateway's journal lives: under Caddy's storage
// when that is a directory, by gateway and Caddy instance as the ledger;
// "" for other storage modules.
func JournalDir(st certmagic.Storage, gateway string) string {
	fs, ok := st.(*certmagic.FileStorage)
	if !ok || fs.Path == "" {
		return ""
	}
	return filepath.Join(fs.Path, "hybrid_llm", "journal", url.PathEscape(gateway), InstanceName())
}

// InstanceName is Caddy's instance ID, which the data directory keeps.
func InstanceName() string {
	if id, err := caddy.InstanceID(); err == nil {
		return id.String()
	}
	return "default"
}

// startJournal reads a new ledger's journal, puts into the books what
// their snapshots lack (days holds what each day of the ledger includes;
// a stored spend book's snapshot says what it includes), and opens it
// for the records to come. Without a journal, the books are as durable
// as their periodic saves.
func (l *Ledger) startJournal(c Config, days map[string]uint64) {
	dir := JournalDir(c.Storage, c.Gateway)
	if dir == "" {
		c.Logger.Warn("with this storage module the ledger is saved every minute and the cloud spend every 5 s: " +
			"a crash loses what came after; with file_system storage every request is journaled")
		return
	}
	t := c.Clock.Now()
	read, err := journal.Read(dir, c.Logger, t)
	if err != nil {
		// appending after records not read could number records twice
		c.Logger.Error("reading the books' journal; the books go on from their last saves, as durable as their periodic saves",
			zap.String("dir", dir), zap.Error(err))
		return
	}
	last, fold := lastJournaled(c, read.LastSeq, days)
	j, err := journal.Open(dir, last, c.Clock, c.Logger)
	if err != nil {
		c.Logger.Error("opening the books' journal; the books are as durable as their periodic saves", zap.String("dir", dir), zap.Error(err))
		return
	}
	l.mu.Lock()
	earliest, n := l.replayLocked(read.Records, days)
	if n > 0 && earliest.Before(l.savedAt) {
		l.savedAt = earliest // the save includes those days
	}
	l.mu.Unlock()
	l.journal = j
	sb, spent := journalSpend(c, j, read)
	if fold != nil {
		spent = foldSpend(c, fold, j, read)
	}
	if n == 0 && spent == 0 && len(read.SetAside) == 0 {
		return
	}
	c.Logger.Info("the books' journal replayed", zap.Int("ledger_records", n), zap.Int("spend_records", spent))
	l.saveReplayed(c, sb, j, t)
}

// lastJournaled returns the highest record number the books' saves and
// the journal hold, which the journal numbers on from, and, without a
// registry or spend book, the book of an earlier config to fold in.
func lastJournaled(c Config, last uint64, days map[string]uint64) (uint64, *SpendBook) {
	for _, seq := range days {
		last = max(last, seq)
	}
	sb := c.Spend
	if sb != nil && sb.stored {
		last = max(last, sb.savedSeq)
	}
	var fold *SpendBook
	if sb == nil && !c.Fleet {
		if fold = bookToFold(c); fold != nil {
			last = max(last, fold.savedSeq)
		}
	}
	return last, fold
}

// journalSpend journals the cloud spend book. With a registry, what no
// book there includes (the last process published up to 2 s before it
// ended) goes into this process's book, published with it, once the
// registry can say what its books include (see ReplayPending). Without
// one, a book new in this process replays the records its snapshot
// lacks (a book journaled before has them all). It returns the book to
// save in storage (nil with a registry, or without a book) and the spend
// records replayed.
func journalSpend(c Config, j *journal.Journal, read journal.Contents) (*SpendBook, int) {
	sb := c.Spend
	if sb == nil {
		return nil, 0
	}
	spent, saved := 0, sb.savedSeq
	if !sb.stored {
		if sb.journal.Load() == nil {
			sb.mu.Lock()
			sb.fleet.pending = &pendingReplay{records: read.Records, published: read.Published}
			sb.mu.Unlock()
		}
		j.UseRegistry()
		saved = read.Published
	} else if sb.journal.Load() == nil {
		spent = sb.replay(read.Records)
	}
	sb.journal.Store(j)
	j.SavedSpend(saved)
	j.SpendOn()
	if len(read.SetAside) > 0 {
		sb.setUnknown("a segment of the books' journal was damaged and set aside: "+read.SetAside[0], read.SetAside[0], c.Logger, c.Gateway)
	}
	if !sb.stored {
		return nil, 0 // nothing to save in storage
	}
	return sb, spent
}

// saveReplayed saves the books at once after a replay, with what they
// include: the state of a damaged segment survives the next crash, and
// the segments read go.
func (l *Ledger) saveReplayed(c Config, sb *SpendBook, j *journal.Journal, t time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sb != nil {
		if err := sb.Save(ctx, c.Storage); err != nil {
			c.Logger.Error("saving cloud spend", zap.Error(err))
		}
	}
	if covered, ok := l.Save(ctx, l.savedAt, t); ok {
		l.savedAt = t
		j.SavedLedger(covered)
		j.Compact()
	}
}

// pendingReplay is the journal read at start, for a registry's book new
// in this process: what its last mark says was published.
type pendingReplay struct {
	records   []journal.Record
	published uint64
}

// ReplayPending puts into a registry's book, new in this process, the
// journal's charges that no book in the registry includes: those after
// the journal's last mark, and after the last record that a book there
// names (publishedFrom, given the journal's ID; the last process may
// have been killed between its put and its mark). It runs once the
// registry's client is provisioned (the ledger and its journal start
// before), before the book is first published; without an answer from
// the registry, the marks decide.
func (b *SpendBook) ReplayPending(publishedFrom func(journalID string) uint64, logger *zap.Logger) {
	if b == nil || b.stored {
		return
	}
	b.mu.Lock()
	p := b.fleet.pending
	b.fleet.pending = nil
	b.mu.Unlock()
	j := b.journal.Load()
	if p == nil || j == nil {
		return
	}
	published := max(p.published, publishedFrom(j.ID()))
	b.savedSeq = published
	if n := b.replay(p.records); n > 0 {
		logger.Info("the books' journal replayed into the registry's book", zap.Int("spend_records", n), zap.Uint64("published_up_to", published))
	}
	j.MarkPublished(published) // the next start knows it without the registry
}

// Join journals the config's stored spend book (c.Spend), or stops
// counting on one that no longer is (a config without clients or spend
// cap). A book that began after the journal (a reload gave the gateway
// clients or a spend cap) first takes the records its snapshot lacks.
func (l *Ledger) Join(c Config) {
	c = c.withDefaults()
	j := l.journal
	if j == nil {
		return
	}
	sb := c.Spend
	if sb == nil || !sb.stored {
		// a registry's book is journaled from the start (see
		// startJournal)
		if sb != nil && sb.journal.Load() == j {
			j.SpendOn()
		} else {
			j.SpendOff()
		}
		return
	}
	if sb.journal.Load() == j {
		j.SpendOn()
		return
	}
	// the segments so far are read outside the journal's lock: the
	// requests of the config still serving are journaled meanwhile, and
	// none is counted twice; no segment goes meanwhile
	j.Join(c.Clock.Now(), c.Logger, func(read journal.Contents, err error) {
		if err == nil {
			sb.replay(read.Records)
			if len(read.SetAside) > 0 {
				sb.setUnknown("a segment of the books' journal was damaged and set aside: "+read.SetAside[0], read.SetAside[0], c.Logger, c.Gateway)
			}
		} else {
			c.Logger.Error("reading the books' journal for the cloud spend; the spend goes on from its last save", zap.Error(err))
		}
		sb.journal.Store(j)
		j.SavedSpend(sb.savedSeq)
		j.SpendOn()
	})
}

// bookToFold returns the gateway's stored book, for a config without a
// book (no clients, no spend cap) and without a registry, when no book
// of this process is in memory: at start, the journal's spend is folded
// into it (see foldSpend). nil otherwise, and when it cannot be read: the
// journal then keeps the spend of the month (see journal.Compact).
// Configs are provisioned one at a time: none loads the book meanwhile.
func bookToFold(c Config) *SpendBook {
	if c.Storage == nil || spendBooks.Holds(c.Gateway) > 0 {
		return nil // a config before had one: it saves it
	}
	b := newSpendBook(c.Gateway, c.Clock)
	b.stored = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.load(ctx, c.Storage); err != nil {
		c.Logger.Warn("reading the stored cloud spend to fold the journal's into; the journal keeps the month's",
			zap.Error(err))
		return nil
	}
	return b
}

// foldSpend adds the journal's charges that the stored book lacks to it,
// marks it unknown when a segment was damaged, and saves it at once, with
// what it includes: the segments it includes may go once the ledger's
// snapshot includes them too. It returns how many charges it added.
func foldSpend(c Config, b *SpendBook, j *journal.Journal, read journal.Contents) int {
	n := b.replay(read.Records)
	if len(read.SetAside) > 0 {
		b.setUnknown("a segment of the books' journal was damaged and set aside: "+read.SetAside[0], read.SetAside[0], c.Logger, c.Gateway)
	}
	b.journal.Store(j)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Save(ctx, c.Storage); err != nil {
		c.Logger.Error("saving cloud spend", zap.Error(err))
	}
	return n
}

// replayLocked adds the records that each day's snapshot lacks to the
// ledger, and returns the earliest one's time and how many there were.
// l.mu is held.
func (l *Ledger) replayLocked(recs []journal.Record, days map[string]uint64) (earliest time.Time, n int) {
	for i := range recs {
		r := &recs[i]
		var at time.Time
		if r.Kind == journal.KindCharge {
			at = time.Unix(0, r.Time)
		} else {
			at = time.Unix(r.Bucket, 0)
		}
		if r.Kind == journal.KindPublished || r.Seq <= days[at.UTC().Format(time.DateOnly)] {
			continue
		}
		b := l.bucketAtLocked(at.Truncate(BucketSize))
		if r.Kind == journal.KindCharge {
			b.addCharge(r.Charge)
		} else {
			// totals so far: the later record, or the snapshot, has more
			b.dur = max(b.dur, r.Dur)
			b.selfSecs = max(b.selfSecs, r.SelfSecs)
			b.cloudGS = max(b.cloudGS, r.CloudGS)
			b.peak = max(b.peak, r.Peak)
		}
		if n == 0 || at.Before(earliest) {
			earliest = at
		}
		n++
	}
	return earliest, n
}

// bucketAtLocked returns the bucket that starts at start, adding one
// when the ledger has none. l.mu is held.
func (l *Ledger) bucketAtLocked(start time.Time) *bucket {
	n := len(l.buckets)
	for i := 1; i <= n; i++ {
		b := &l.buckets[(l.next-i+n)%n]
		if b.start.Equal(start) {
			return b
		}
		if b.start.Before(start) {
			break
		}
	}
	return l.bucketLocked(start)
}

// replay adds the charges its snapshot lacks to the book, and returns how
// many there were.
func (b *SpendBook) replay(recs []journal.Record) int {
	n := 0
	for i := range recs {
		r := &recs[i]
		if r.Kind != journal.KindCharge || r.Seq <= b.savedSeq || r.CloudUSD <= 0 || r.Shadow {
			continue
		}
		b.Add(r.Client, r.CloudUSD, time.Unix(0, r.Time))
		n++
	}
	return n
}
