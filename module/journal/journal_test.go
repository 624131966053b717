// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"go.uber.org/zap"
)

// open is Open of dir after last, closed when the test ends.
func open(t *testing.T, dir string, last uint64) *Journal {
	t.Helper()
	j, err := Open(dir, last, clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// charge appends c at at, as the books do.
func charge(j *Journal, at time.Time, c Charge) {
	j.Lock()
	j.AppendChargeLocked(at, c)
	j.Unlock()
}

// read is Read of dir, now.
func read(t *testing.T, dir string) Contents {
	t.Helper()
	c, err := Read(dir, zap.NewNop(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// segments are the segment files in dir.
func segments(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*"+SegmentSuffix))
	return m
}

// The records on disk, byte for byte: the segments' names, the keys and
// their order, the numbers' formatting. What a process wrote, the next
// one of any version reads; this is what the journal wrote before it was
// a package of its own.
func TestTheFormatOnDisk(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 0, clock.System, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	j.UseRegistry()
	at := time.Unix(1800000000, 123456789)
	cs := []Charge{
		{Client: "team", Prompt: 1234, Completion: 567, CloudUSD: 0.0012345},
		{SelfHosted: true, Prompt: 1000, Completion: 100},
		{Client: `a "quoted" név` + "\x01\\", Prompt: 3, Completion: 3, Estimated: true},
		{Shadow: true, Prompt: 5, Completion: 5, CloudUSD: 0.1},
		{CloudUSD: math.NaN()},
		{CloudUSD: 1e-9, Prompt: -1},
		{CloudUSD: 123456789012.5, Completion: math.MaxInt64, Estimated: true, Shadow: true, SelfHosted: true, Client: "x"},
	}
	for i, c := range cs {
		charge(j, at.Add(time.Duration(i)*time.Second), c)
	}
	minute := at.Truncate(time.Minute)
	j.Lock()
	j.AppendDemandLocked(Demand{Bucket: minute.Unix(), Dur: 59 * time.Second, SelfSecs: 12.5, CloudGS: 0.333333333333, Peak: 3})
	j.AppendDemandLocked(Demand{Bucket: minute.Add(time.Minute).Unix(), Dur: time.Second, SelfSecs: math.Inf(1), CloudGS: 1e21})
	j.Unlock()
	j.MarkPublished(3)
	j.SavedLedger(2)
	j.Compact()
	charge(j, at, cs[0])
	j.Sync()
	j.Close()
	j2 := open(t, dir, 12)
	charge(j2, at, cs[2])
	j2.Close()
	want := map[string]string{
		"00000000000000000001.jsonl": `{"seq":1,"k":"r","t":1800000000123456789,"c":"team","p":1234,"o":567,"usd":0.0012345}
{"seq":2,"k":"r","t":1800000001123456789,"self":true,"p":1000,"o":100}
{"seq":3,"k":"r","t":1800000002123456789,"c":"a \"quoted\" név\u0001\\","p":3,"o":3,"est":true}
{"seq":4,"k":"r","t":1800000003123456789,"p":5,"o":5,"usd":0.1,"sh":true}
{"seq":5,"k":"r","t":1800000004123456789,"p":0,"o":0,"usd":0}
{"seq":6,"k":"r","t":1800000005123456789,"p":-1,"o":0,"usd":1e-09}
{"seq":7,"k":"r","t":1800000006123456789,"c":"x","self":true,"p":0,"o":9223372036854775807,"usd":1.234567890125e+11,"est":true,"sh":true}
{"seq":8,"k":"d","b":1800000000,"dur":59000000000,"s":12.5,"cl":0.333333333333,"pk":3}
{"seq":9,"k":"d","b":1800000060,"dur":1000000000,"s":0,"cl":1e+21,"pk":0}
{"seq":10,"k":"p","upto":3}
`,
		"00000000000000000011.jsonl": `{"seq":11,"k":"p","upto":3}
{"seq":12,"k":"r","t":1800000000123456789,"c":"team","p":1234,"o":567,"usd":0.0012345}
`,
		"00000000000000000013.jsonl": `{"seq":13,"k":"r","t":1800000000123456789,"c":"a \"quoted\" név\u0001\\","p":3,"o":3,"est":true}
`,
	}
	got := segments(dir)
	if len(got) != len(want) {
		t.Errorf("segments %q, want %d", got, len(want))
	}
	for _, path := range got {
		raw, _ := os.ReadFile(path)
		if w, ok := want[filepath.Base(path)]; !ok || string(raw) != w {
			t.Errorf("%s:\n%s\nwant:\n%s", filepath.Base(path), raw, w)
		}
	}
	// and read back as written
	c := read(t, dir)
	if len(c.Records) != 13 || c.LastSeq != 13 || c.Published != 3 || len(c.SetAside) != 0 {
		t.Fatalf("read %+v", c)
	}
	if r := c.Records[2]; r.Kind != KindCharge || r.Charge != cs[2] || r.Time != at.Add(2*time.Second).UnixNano() {
		t.Errorf("a charge read back: %+v", r)
	}
	if r := c.Records[7]; r.Kind != KindDemand || r.Demand != (Demand{Bucket: minute.Unix(), Dur: 59 * time.Second, SelfSecs: 12.5, CloudGS: 0.333333333333, Peak: 3}) {
		t.Errorf("a demand read back: %+v", r)
	}
	if id, _ := os.ReadFile(filepath.Join(dir, "id")); strings.TrimSpace(string(id)) != j2.ID() || len(j2.ID()) != 24 || j.ID() != j2.ID() {
		t.Errorf("id %q, journals %q and %q", id, j.ID(), j2.ID())
	}
}

// A line cut short at a segment's end is a write the machine did not
// finish: ignored, and the next record starts on a line of its own.
func TestATornLineIsIgnored(t *testing.T) {
	dir := t.TempDir()
	good := `{"seq":1,"k":"r","t":1,"p":1,"o":1}` + "\n" + `{"seq":2,"k":"r","t":2,"p":2,"o":2,"usd":0.5}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, SegmentName(1)), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SegmentName(3)), []byte(`{"seq":3,"k":"r","t":3,"p"`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := read(t, dir)
	if len(c.Records) != 2 || c.LastSeq != 2 || len(c.SetAside) != 0 || c.Records[1].CloudUSD != 0.5 {
		t.Fatalf("read %+v", c)
	}
	j := open(t, dir, c.LastSeq)
	charge(j, time.Unix(0, 3), Charge{Client: `a "quoted" név`, Prompt: 3, Completion: 3})
	j.Close()
	c = read(t, dir)
	if len(c.Records) != 3 || len(c.SetAside) != 0 || c.Records[2].Client != `a "quoted" név` {
		t.Fatalf("after the next record: %+v", c)
	}
}

// A process killed after two failed writes in a row leaves two segments
// that end torn, the second holding nothing else: the next Open empties
// every segment after the last record read, so that none of its records
// is appended to a torn line.
func TestOpenEmptiesTheTornSegmentsAfterTheLast(t *testing.T) {
	dir := t.TempDir()
	first := `{"seq":1,"k":"r","t":1,"p":1,"o":1,"usd":0.5}` + "\n" + `{"seq":2,"k":"r","t":18000`
	if err := os.WriteFile(filepath.Join(dir, SegmentName(1)), []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SegmentName(3)), []byte(`{"seq":3,"k":"r","t":18000`), 0o600); err != nil {
		t.Fatal(err)
	}
	j := open(t, dir, read(t, dir).LastSeq)
	charge(j, time.Unix(0, 2), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}) // seq 2
	j.Compact()                                                                  // the next segment: 3
	charge(j, time.Unix(0, 3), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.125})
	c := read(t, dir)
	if len(c.Records) != 3 || c.LastSeq != 3 || len(c.SetAside) != 0 || c.Records[2].CloudUSD != 0.125 {
		t.Errorf("read %+v", c)
	}
}

// tornFile is a segment on a disk that fails: its next fails writes
// write half their record, and fail.
type tornFile struct {
	segmentFile
	fails int
}

func (f *tornFile) Write(b []byte) (int, error) {
	if f.fails > 0 {
		f.fails--
		n, _ := f.segmentFile.Write(b[:len(b)/2])
		return n, errors.New("no space left on device")
	}
	return f.segmentFile.Write(b)
}

// After a failed write (a full disk, a short write) the next record
// starts a segment of its own: what the failed write left is a torn last
// line, not a line in the middle that takes the next record with it.
func TestASegmentStartsAfterAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0)
	at := time.Unix(0, 1)
	charge(j, at, Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5})
	j.Lock()
	j.f = &tornFile{segmentFile: j.f, fails: 1}
	j.Unlock()
	charge(j, at, Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25}) // half written
	charge(j, at, Charge{Prompt: 1, Completion: 1, CloudUSD: 0.125})
	// killed: the record that failed is lost with the process, the others are not
	c := read(t, dir)
	if len(c.Records) != 2 || c.Records[0].Seq != 1 || c.Records[1].Seq != 3 || c.Records[1].CloudUSD != 0.125 {
		t.Errorf("read %+v; want records 1 and 3", c.Records)
	}
	if len(c.SetAside) != 0 {
		t.Errorf("set aside %q: a torn write is no damage", c.SetAside)
	}
	if n := len(segments(dir)); n != 2 {
		t.Errorf("%d segments, want 2: the one the write failed in, and the next", n)
	}
}

// A segment with a line that cannot be read is set aside, renamed, never
// deleted; its readable records count.
func TestADamagedSegmentIsSetAside(t *testing.T) {
	dir := t.TempDir()
	damaged := `{"seq":1,"k":"r","t":1,"c":"team","p":1,"o":1,"usd":0.5}` + "\n" + "\x00\x00garbage\n" +
		`{"seq":3,"k":"x","t":1}` + "\n" + `{"seq":4,"k":"r","t":1,"c":"team","p":1,"o":1,"usd":0.25}` + "\n"
	seg := filepath.Join(dir, SegmentName(1))
	if err := os.WriteFile(seg, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1800000000, 0)
	c, err := Read(dir, zap.NewNop(), at)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 2 || c.LastSeq != 4 || len(c.SetAside) != 1 || c.SetAside[0] != seg+".corrupt-1800000000" {
		t.Fatalf("read %+v", c)
	}
	if raw, _ := os.ReadFile(c.SetAside[0]); string(raw) != damaged {
		t.Errorf("what was set aside: %q", raw)
	}
	if n := len(segments(dir)); n != 0 {
		t.Errorf("%d segments left", n)
	}
	if c, err := Read(filepath.Join(dir, "none"), zap.NewNop(), at); err != nil || len(c.Records) != 0 {
		t.Errorf("a journal not made yet: %+v, %v", c, err)
	}
}

// Compact deletes the segments both snapshots include, and, without a
// spend book, those its snapshot lacks once their month is over.
func TestCompact(t *testing.T) {
	dir := t.TempDir()
	month := time.Now().UTC()
	c := clock.NewManual(month)
	j, err := Open(dir, 0, c, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.SpendOn()
	for i := range 3 {
		charge(j, time.Now(), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5})
		j.Compact() // nothing saved yet: every segment stays
		if n := len(segments(dir)); n != i+2 {
			t.Fatalf("unsaved: %d segments, want %d", n, i+2)
		}
	}
	// no record since the last compaction: the open segment stays the
	// open one
	j.SavedLedger(3)
	j.Compact()
	if n := len(segments(dir)); n != 4 {
		t.Errorf("the ledger's saved, not the spend's: %d segments, want 4", n)
	}
	j.SavedSpend(2)
	j.Compact()
	if n := len(segments(dir)); n != 2 {
		t.Errorf("the spend's saved up to 2: %d segments, want 2 (the one with record 3, and the open one)", n)
	}
	j.SavedSpend(3)
	j.Compact()
	if n := len(segments(dir)); n != 1 {
		t.Errorf("both saved: %d segments, want the open one", n)
	}
	if got := read(t, dir); len(got.Records) != 0 {
		t.Errorf("records left %+v", got.Records)
	}
	// without a spend book: the spend its snapshot lacks stays for its month
	charge(j, time.Now(), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25})
	j.SpendOff()
	j.SavedLedger(4)
	j.Compact()
	if n := len(segments(dir)); n != 2 {
		t.Errorf("without a book: %d segments, want 2", n)
	}
	c.Set(time.Date(month.Year(), month.Month()+1, 1, 1, 0, 0, 0, time.UTC))
	j.Compact()
	if n := len(segments(dir)); n != 1 {
		t.Errorf("a month later: %d segments, want the open one", n)
	}
}

// With a registry, the mark of what was published outlives the segments
// it was in: each compaction marks it again.
func TestTheMarkOutlivesCompaction(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0)
	j.UseRegistry()
	j.SpendOn()
	charge(j, time.Now(), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5})
	charge(j, time.Now(), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25})
	j.MarkPublished(2)
	j.MarkPublished(2) // marked already: not written again
	j.MarkPublished(1)
	if c := read(t, dir); c.Published != 2 || c.LastSeq != 3 {
		t.Fatalf("read %+v; want published 2, last 3", c)
	}
	j.SavedLedger(3)
	j.Compact() // the mark of 2 again, record 4
	if c := read(t, dir); c.Published != 2 || c.LastSeq != 4 || len(c.Records) != 4 {
		t.Fatalf("after a compaction: %+v; the first segment holds what was not published", c)
	}
	j.MarkPublished(4)
	j.SavedLedger(5)
	j.Compact()
	c := read(t, dir)
	for _, r := range c.Records {
		if r.Kind != KindPublished {
			t.Errorf("left after the segments went: %+v", r)
		}
	}
	if c.Published != 4 || c.LastSeq != 6 {
		t.Errorf("after the segments went: %+v; want published 4, last 6", c)
	}
}

// Join reads the segments outside the journal's lock: records appended
// meanwhile are in the segment it starts, not in what it gives.
func TestJoinReadsOutsideTheLock(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, 0)
	charge(j, time.Now(), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.5})
	orig := readSegmentFile
	t.Cleanup(func() { readSegmentFile = orig })
	charged := false
	readSegmentFile = func(path string) ([]byte, error) {
		if !charged {
			charged = true
			if !j.mu.TryLock() {
				t.Error("a segment is read under the journal's lock")
			} else {
				j.mu.Unlock()
				charge(j, time.Now(), Charge{Prompt: 1, Completion: 1, CloudUSD: 0.25})
			}
		}
		return orig(path)
	}
	var joined Contents
	j.Join(time.Now(), zap.NewNop(), func(c Contents, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if j.compactMu.TryLock() {
			t.Error("compactions are not held off while join runs")
			j.compactMu.Unlock()
		}
		joined = c
	})
	readSegmentFile = orig
	if len(joined.Records) != 1 || joined.Records[0].CloudUSD != 0.5 {
		t.Errorf("joined %+v; want the record before Join only", joined.Records)
	}
	if c := read(t, dir); len(c.Records) != 2 || c.LastSeq != 2 {
		t.Errorf("read %+v; want both records", c)
	}
}

// A charge appended: one line, one write(2), nothing allocated.
func BenchmarkAppendCharge(b *testing.B) {
	j, err := Open(b.TempDir(), 0, clock.System, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	c := Charge{Client: "team", Prompt: 1234, Completion: 567, CloudUSD: 0.0012345}
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		j.Lock()
		j.AppendChargeLocked(at, c)
		j.Unlock()
	}
}
