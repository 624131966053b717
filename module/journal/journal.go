// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package journal is the write-ahead journal of a gateway's books (the
// ledger and the cloud spend): each finished request that counted tokens
// or cloud cost is appended to it as it enters the books (a Charge), and
// once a second the ledger's demand of the minute (a Demand). A record is
// one line of JSON, written with one write(2) on a file opened O_APPEND:
// once written, the kernel has it, and a process killed the next instant
// loses nothing; the file is synced once a second (Sync), for a machine
// that stops.
//
// The journal is a series of segments, files named by their first
// record; the books start one at each start (Open), each ledger save
// (Compact), each book that joins (Join) and after a failed write. A
// segment whose records both snapshots include, the ledger's and the
// spend's (SavedLedger, SavedSpend), is deleted by Compact. Read gives the
// records back: a last line cut short (a write the machine or the disk
// did not finish) is ignored; a segment with a line that cannot be read is
// set aside, renamed, never deleted. With a registry the journal marks
// what each publication of the spend includes (MarkPublished).
//
// The journal knows nothing of what the books do with its records: the
// gateway (package hybridllm) charges, replays and joins them. It is a
// leaf: of the product it imports only module/clock; it is given its
// clock and its logger.
package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"go.uber.org/zap"
)

// Journal is a gateway's journal, open for appending. Its methods are
// safe for concurrent use; those named ...Locked are called between Lock
// and Unlock.
type Journal struct {
	dir    string
	id     string // names the journal in the books it feeds (see journalID)
	logger *zap.Logger
	clock  clock.Clock // of the month a segment is kept for

	// mu orders the records: a record enters the books and the file
	// under it, and a snapshot is copied under it, so that the last
	// record's seq is what the snapshot includes
	mu     sync.Mutex
	f      segmentFile // the open segment; nil when the next record starts one, or once closed
	closed bool        // nothing more is journaled
	seq    uint64      // the last record's
	buf    []byte
	synced bool // nothing written since the last sync
	failed bool // the last write failed (logged once)

	// one compaction at a time, and none while a book that joins reads
	// the segments (see Join)
	compactMu sync.Mutex

	covered // what the books' snapshots include
}

// covered is what the books' saved snapshots include: compaction drops
// the segments they cover.
type covered struct {
	// with a registry, the spend's is what the books published there
	// include
	ledgerSaved, spendSaved atomic.Uint64
	spendOn                 atomic.Bool // a spend book is journaled
	registry                bool        // with a registry: it marks what was published
}

// segmentFile is an open segment: an *os.File (a test's stands in for
// a disk that fails).
type segmentFile interface {
	Write(b []byte) (int, error)
	Sync() error
	Close() error
}

// readSegmentFile reads a segment (a test's sees when a segment is read).
var readSegmentFile = os.ReadFile

// Charge is what a finished request adds to the books: a charge record
// is one, with its time.
type Charge struct {
	Client     string `json:"c,omitempty"`    // a known client's name; "" for none
	SelfHosted bool   `json:"self,omitempty"` // served by a vllm group
	Prompt     int64  `json:"p,omitempty"`
	Completion int64  `json:"o,omitempty"`
	// the classes within them: the prompt's cached and written to the
	// provider's cache, the completion's reasoning
	Cached     int64   `json:"k,omitempty"`
	CacheWrite int64   `json:"kw,omitempty"`
	Reasoning  int64   `json:"r,omitempty"`
	CloudUSD   float64 `json:"usd,omitempty"` // for a mirror copy: what it cost, wherever it ran
	Estimated  bool    `json:"est,omitempty"` // the tokens were estimated, not reported by the upstream
	Shadow     bool    `json:"sh,omitempty"`  // a mirror copy: validation, outside the business bill and the spend
}

// Demand is a demand record: one bucket of the ledger's demand, its
// totals so far.
type Demand struct {
	Bucket   int64         `json:"b,omitempty"`   // the bucket's start, Unix seconds
	Dur      time.Duration `json:"dur,omitempty"` // how much of it was sampled
	SelfSecs float64       `json:"s,omitempty"`   // GPU-equivalent seconds, self-hosted
	CloudGS  float64       `json:"cl,omitempty"`  // GPU-equivalent seconds, in the cloud
	Peak     float64       `json:"pk,omitempty"`
}

// Record is a record as read back: a charge (KindCharge: Time and
// Charge), the demand (KindDemand: Demand) or a mark of what was
// published (KindPublished: Upto).
type Record struct {
	Seq  uint64 `json:"seq"`
	Kind string `json:"k"`
	Time int64  `json:"t,omitempty"` // a charge's, Unix nanoseconds
	Charge
	Demand
	// published: every charge up to here is in a book the registry holds
	Upto uint64 `json:"upto,omitempty"`
}

// The kinds of record.
const (
	KindCharge    = "r"
	KindDemand    = "d"
	KindPublished = "p"
)

// SegmentSuffix ends a segment's file name.
const SegmentSuffix = ".jsonl"

const segmentDigits = 20

// SegmentName is the file of the segment whose first record is first.
func SegmentName(first uint64) string {
	return fmt.Sprintf("%0*d%s", segmentDigits, first, SegmentSuffix)
}

// segmentFirst reads a segment's first seq from its file name.
func segmentFirst(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, SegmentSuffix)
	if !ok || len(digits) != segmentDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// Contents is what a journal's directory holds.
type Contents struct {
	Records   []Record // in seq order
	LastSeq   uint64
	Published uint64   // the last mark of what the registry holds
	SetAside  []string // damaged segments, renamed
}

// Read reads every segment in dir (none when dir does not exist). A
// damaged segment's readable records are kept, and the segment is set
// aside: renamed to <segment>.corrupt-<Unix seconds of at>, and logged.
func Read(dir string, logger *zap.Logger, at time.Time) (Contents, error) {
	return readTo(dir, math.MaxUint64, logger, at)
}

// readTo is Read of the segments that begin at or before upto, and of
// their records up to it.
func readTo(dir string, upto uint64, logger *zap.Logger, at time.Time) (Contents, error) {
	var out Contents
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	for _, e := range entries { // by name: in seq order
		if first, ok := segmentFirst(e.Name()); !ok || !e.Type().IsRegular() || first > upto {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := readSegmentFile(path)
		if err != nil {
			return out, err
		}
		recs, bad := parseSegment(data)
		for _, r := range recs {
			if r.Seq <= upto {
				out.Records = append(out.Records, r)
			}
		}
		if bad == nil {
			continue
		}
		aside := path + ".corrupt-" + strconv.FormatInt(at.Unix(), 10)
		if err := os.Rename(path, aside); err != nil {
			return out, fmt.Errorf("setting aside the damaged journal segment %s: %v", path, err)
		}
		out.SetAside = append(out.SetAside, aside)
		logger.Error("a segment of the books' journal could not be read; set aside, its readable records counted",
			zap.String("segment", path), zap.String("set_aside_as", aside), zap.Error(bad))
	}
	slices.SortStableFunc(out.Records, func(a, b Record) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	if n := len(out.Records); n > 0 {
		out.LastSeq = out.Records[n-1].Seq
	}
	for i := range out.Records {
		if r := &out.Records[i]; r.Kind == KindPublished {
			out.Published = max(out.Published, r.Upto)
		}
	}
	return out, nil
}

// parseSegment reads a segment's records; bad says why a line could not
// be read. A last line without its newline is one the writer did not
// finish: ignored.
func parseSegment(data []byte) (recs []Record, bad error) {
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !complete {
			break // torn
		}
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.Seq == 0 || (r.Kind != KindCharge && r.Kind != KindDemand && r.Kind != KindPublished) {
			if err == nil {
				err = fmt.Errorf("not a record")
			}
			if bad == nil {
				bad = fmt.Errorf("line %d: %v", n, err)
			}
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad
}

// Open starts a new segment in dir, making dir if need be, after the
// records already there (last is the highest seq the journal or a
// snapshot knows: the next record is last+1). Segments after last, which
// hold at most a line cut short, are emptied. c tells the month a segment
// is kept for (see Compact); logger is told of failed writes.
func Open(dir string, last uint64, c clock.Clock, logger *zap.Logger) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// a segment after the last record read holds at most a line cut
	// short (complete ones were read, or set aside): emptied, so that no
	// record of this process is appended to it (after a failed write the
	// next record starts a segment, so there may be several)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if first, ok := segmentFirst(e.Name()); ok && first > last {
			if err := os.Truncate(filepath.Join(dir, e.Name()), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	id, err := journalID(dir)
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, id: id, logger: logger, clock: c, seq: last, synced: true, buf: make([]byte, 0, 256)}
	if err := j.startSegmentLocked(); err != nil {
		return nil, err
	}
	return j, nil
}

// journalID returns the journal's name, kept in its directory: random,
// made the first time. The books a registry holds carry it, with the
// last record they include.
func journalID(dir string) (string, error) {
	path := filepath.Join(dir, "id")
	raw, err := os.ReadFile(path)
	if err == nil && len(bytes.TrimSpace(raw)) > 0 {
		return string(bytes.TrimSpace(raw)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var r [12]byte
	_, _ = rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}

// ID is the journal's name, kept in its directory: the books a registry
// holds carry it, with the last record they include.
func (j *Journal) ID() string { return j.id }

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Lock holds the order of the records: a record enters the books and the
// journal between Lock and Unlock, and a book's snapshot is copied between
// them with SeqLocked, so that the snapshot includes every record up to
// that seq and none after.
func (j *Journal) Lock() { j.mu.Lock() }

// Unlock lets go of what Lock holds.
func (j *Journal) Unlock() { j.mu.Unlock() }

// SeqLocked is the last record's seq. Between Lock and Unlock.
func (j *Journal) SeqLocked() uint64 { return j.seq }

// startSegmentLocked closes the open segment, if any, and opens the next
// one. j.mu is held, or j is not shared yet.
func (j *Journal) startSegmentLocked() error {
	f, err := openSegment(j.dir, j.seq+1)
	if err != nil {
		return err
	}
	if j.f != nil {
		_ = j.f.Sync()
		_ = j.f.Close()
	}
	j.f, j.synced = f, true
	return nil
}

// openSegment opens the segment whose first record is first.
func openSegment(dir string, first uint64) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, SegmentName(first)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}

// detachSegmentLocked takes the open segment away: the next record
// starts a new one. The caller syncs and closes it, outside j.mu. j.mu is
// held.
func (j *Journal) detachSegmentLocked() segmentFile {
	f := j.f
	j.f, j.synced = nil, true
	return f
}

// writeLocked appends j.buf, one record (the last, j.seq), to the open
// segment, starting one when there is none. j.mu is held. A failed write
// is logged once until one succeeds; the books have the record in memory,
// and their next snapshot saves it. The segment it failed in may end with
// a part of the record: the next record starts a new segment, so that the
// part is a torn last line, not one that takes that record with it.
func (j *Journal) writeLocked() {
	if j.closed {
		return
	}
	if j.f == nil {
		f, err := openSegment(j.dir, j.seq)
		if err != nil {
			j.writeFailedLocked(err)
			return
		}
		j.f = f
	}
	if _, err := j.f.Write(j.buf); err != nil {
		f := j.detachSegmentLocked()
		_ = f.Sync()
		_ = f.Close()
		j.writeFailedLocked(err)
		return
	}
	j.failed, j.synced = false, false
}

// writeFailedLocked logs a failed write, once until one succeeds. j.mu is
// held.
func (j *Journal) writeFailedLocked(err error) {
	if !j.failed {
		j.failed = true
		j.logger.Error("appending to the books' journal; what follows is durable only at the books' next save", zap.Error(err))
	}
}

// AppendChargeLocked appends a charge at at, the next record, with one
// write(2); nothing allocated. Between Lock and Unlock. A failed write is
// logged once until one succeeds: the books have the charge in memory,
// and their next snapshot saves it.
func (j *Journal) AppendChargeLocked(at time.Time, c Charge) {
	j.seq++
	j.appendCharge(j.seq, at, c)
	j.writeLocked()
}

// AppendDemandLocked appends a bucket's demand, its totals so far, the
// next record. Between Lock and Unlock.
func (j *Journal) AppendDemandLocked(d Demand) {
	j.seq++
	j.appendDemand(j.seq, d)
	j.writeLocked()
}

// appendCharge encodes a charge record into j.buf. j.mu is held.
func (j *Journal) appendCharge(seq uint64, at time.Time, c Charge) {
	b := j.buf[:0]
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"k":"r","t":`...)
	b = strconv.AppendInt(b, at.UnixNano(), 10)
	if c.Client != "" {
		b = append(b, `,"c":`...)
		b = appendJSONString(b, c.Client)
	}
	if c.SelfHosted {
		b = append(b, `,"self":true`...)
	}
	b = append(b, `,"p":`...)
	b = strconv.AppendInt(b, c.Prompt, 10)
	b = append(b, `,"o":`...)
	b = strconv.AppendInt(b, c.Completion, 10)
	if c.CloudUSD != 0 {
		b = append(b, `,"usd":`...)
		b = appendFloat(b, c.CloudUSD)
	}
	if c.Estimated {
		b = append(b, `,"est":true`...)
	}
	if c.Shadow {
		b = append(b, `,"sh":true`...)
	}
	j.buf = append(b, "}\n"...)
}

// appendDemand encodes a demand record into j.buf. j.mu is held.
func (j *Journal) appendDemand(seq uint64, d Demand) {
	out := j.buf[:0]
	out = append(out, `{"seq":`...)
	out = strconv.AppendUint(out, seq, 10)
	out = append(out, `,"k":"d","b":`...)
	out = strconv.AppendInt(out, d.Bucket, 10)
	out = append(out, `,"dur":`...)
	out = strconv.AppendInt(out, int64(d.Dur), 10)
	out = append(out, `,"s":`...)
	out = appendFloat(out, d.SelfSecs)
	out = append(out, `,"cl":`...)
	out = appendFloat(out, d.CloudGS)
	out = append(out, `,"pk":`...)
	out = appendFloat(out, d.Peak)
	j.buf = append(out, "}\n"...)
}

// MarkPublished records that every charge up to seq is in a book the
// registry holds (a mark, KindPublished); the next start counts the
// charges after it into its own book. A mark at or before the last is
// not written again.
func (j *Journal) MarkPublished(seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if seq <= j.spendSaved.Load() {
		return // marked already
	}
	j.spendSaved.Store(seq)
	j.markLocked()
}

// markLocked appends the mark of what was published. j.mu is held.
func (j *Journal) markLocked() {
	j.seq++
	b := append(j.buf[:0], `{"seq":`...)
	b = strconv.AppendUint(b, j.seq, 10)
	b = append(b, `,"k":"p","upto":`...)
	b = strconv.AppendUint(b, j.spendSaved.Load(), 10)
	j.buf = append(b, "}\n"...)
	j.writeLocked()
}

// appendFloat writes a finite number as JSON; others as 0.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendJSONString writes s as a JSON string: printable ASCII as it is,
// anything else through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Sync writes the open segment to the disk, when something was written
// since the last time.
func (j *Journal) Sync() {
	j.mu.Lock()
	f, synced := j.f, j.synced
	j.synced = true
	j.mu.Unlock()
	if f != nil && !synced {
		_ = f.Sync() // a segment closed meanwhile was synced as it closed
	}
}

// SavedLedger records that the ledger's saved snapshot includes every
// record up to seq: Compact may delete the segments it includes.
func (j *Journal) SavedLedger(seq uint64) { j.ledgerSaved.Store(seq) }

// SavedSpend records that the spend book's saved snapshot (with a
// registry: what the registry holds) includes every record up to seq.
func (j *Journal) SavedSpend(seq uint64) { j.spendSaved.Store(seq) }

// SpendOn says that a spend book is journaled: Compact keeps the segments
// its snapshot lacks (see SavedSpend).
func (j *Journal) SpendOn() { j.spendOn.Store(true) }

// SpendOff says that no spend book is journaled (a config without one):
// the segments the spend's snapshot lacks go once their month is over.
func (j *Journal) SpendOff() { j.spendOn.Store(false) }

// UseRegistry says that the spend is a registry's: each compaction marks
// again what was published (see MarkPublished), so that the mark outlives
// the segments it was in. It is called before the journal is shared.
func (j *Journal) UseRegistry() { j.registry = true }

// Join reads the segments so far for a book that joins the journal (a
// reload gave the gateway clients or a spend cap) and gives join what
// they hold, or why they could not be read (logger is told of a segment
// set aside, at names it, as with Read). The segments are read outside
// the journal's lock, which only closes the open one: the next record
// starts a new one, not read, so that the records appended meanwhile are
// not in what join is given. No segment is compacted until join returns.
func (j *Journal) Join(at time.Time, logger *zap.Logger, join func(c Contents, err error)) {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	j.mu.Lock()
	f := j.detachSegmentLocked()
	upto := j.seq
	j.mu.Unlock()
	if f != nil {
		_ = f.Sync()
		_ = f.Close()
	}
	c, err := readTo(j.dir, upto, logger, at)
	join(c, err)
}

// Compact starts a new segment and deletes the segments whose records
// both snapshots include: the ledger's, and the spend's (SavedLedger,
// SavedSpend). Without a book that saves the spend (SpendOff; with a
// registry: that publishes it), the stored book includes what was
// folded into it at start, and the segments after that go once their
// month is over: a book of a later config counts them.
func (j *Journal) Compact() {
	j.compactMu.Lock()
	defer j.compactMu.Unlock()
	ledgerCovered, spendCovered := j.ledgerSaved.Load(), j.spendSaved.Load()
	spendOn := j.spendOn.Load()
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	err := j.startSegmentLocked()
	if err == nil && j.registry {
		j.markLocked() // the mark outlives the segments it was in
	}
	j.mu.Unlock()
	if err != nil {
		j.logger.Error("starting a segment of the books' journal", zap.Error(err))
		return
	}
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return
	}
	var firsts []uint64
	var segs []fs.DirEntry
	for _, e := range entries {
		if n, ok := segmentFirst(e.Name()); ok {
			firsts, segs = append(firsts, n), append(segs, e)
		}
	}
	t := j.clock.Now().UTC()
	month := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	// a segment holds the records from its first up to the next one's
	for i := 0; i+1 < len(firsts); i++ {
		last := firsts[i+1] - 1
		if last > ledgerCovered {
			continue
		}
		if last > spendCovered {
			if spendOn {
				continue
			}
			// not in the stored book: it goes once its records' month,
			// which its last write ends, is over
			info, err := segs[i].Info()
			if err != nil || !info.ModTime().Before(month) {
				continue
			}
		}
		if err := os.Remove(filepath.Join(j.dir, SegmentName(firsts[i]))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.logger.Warn("deleting a segment of the books' journal", zap.Error(err))
		}
	}
}

// Close syncs and closes the open segment; what is appended after is
// not journaled.
func (j *Journal) Close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	if j.f != nil {
		_ = j.f.Sync()
		_ = j.f.Close()
		j.f = nil
	}
}
