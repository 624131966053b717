// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
)

// The ledger persists through Caddy's storage (its data directory, or the
// storage module configured, so that a cluster's storage serves too): a
// key per gateway, Caddy instance and UTC day, holding that day's
// buckets. It is saved every minute and when the ledger ends, and the
// last 31 days are read back when it starts; with file_system storage
// the journal (see journal.go) holds what came after the last save.

const (
	keyPrefix = "hybrid_llm/ledger/"
	saveEvery = time.Minute
	format    = 1
)

// ledgerDay is one day of a ledger as stored.
type ledgerDay struct {
	Version int            `json:"version"`
	Buckets []storedBucket `json:"buckets"`
	// the last record of the journal the day includes (see journal.go)
	JournalSeq uint64 `json:"journal_seq,omitempty"`
}

// storedBucket is a bucket as stored.
type storedBucket struct {
	Start            int64   `json:"start"` // Unix seconds
	DurationMS       int64   `json:"duration_ms"`
	SelfGPUSeconds   float64 `json:"self_gpu_seconds"`
	CloudGPUSeconds  float64 `json:"cloud_gpu_seconds"`
	PeakGPUs         float64 `json:"peak_gpus"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TokenClasses
	SelfTokens int64            `json:"self_tokens"`
	CloudUSD   float64          `json:"cloud_usd"`
	Shadow     *cost.Validation `json:"shadow,omitempty"`
	Clients    []ClientUse      `json:"clients,omitempty"`
}

// store is where a ledger is kept.
type store struct {
	storage certmagic.Storage
	prefix  string // the gateway's and instance's keys
	logger  *zap.Logger
}

func newStore(storage certmagic.Storage, gateway, instance string, logger *zap.Logger) *store {
	return &store{storage: storage, prefix: keyPrefix + url.PathEscape(gateway) + "/" + instance + "/", logger: logger}
}

func (s *store) key(day time.Time) string {
	return s.prefix + day.UTC().Format(time.DateOnly) + ".json"
}

// Save stores the days from since (a minute before, for a request that
// ended then and was counted after) to t, and reports the last record of
// the journal they include, and whether all were stored.
func (l *Ledger) Save(ctx context.Context, since, t time.Time) (journalSeq uint64, ok bool) {
	s := l.store
	if s == nil {
		return 0, false
	}
	// the copies, at one record of the journal
	var docs []ledgerDay
	var days []time.Time
	j := l.journal
	if j != nil {
		j.Lock()
		journalSeq = j.SeqLocked()
	}
	l.mu.Lock()
	for day := since.Add(-BucketSize).UTC().Truncate(24 * time.Hour); !day.After(t); day = day.Add(24 * time.Hour) {
		next := day.Add(24 * time.Hour)
		doc := ledgerDay{Version: format, JournalSeq: journalSeq}
		for i := range l.buckets {
			if b := &l.buckets[i]; b.in(day, next) && (b.dur > 0 || b.promptTokens > 0 || b.completionTokens > 0 || b.shadow.Requests > 0) {
				doc.Buckets = append(doc.Buckets, storeBucket(b))
			}
		}
		if len(doc.Buckets) > 0 {
			docs, days = append(docs, doc), append(days, day)
		}
	}
	l.mu.Unlock()
	if j != nil {
		j.Unlock()
	}
	ok = true
	for i, doc := range docs {
		slices.SortFunc(doc.Buckets, func(a, b storedBucket) int { return int(a.Start - b.Start) })
		data, err := json.Marshal(doc)
		if err == nil {
			err = s.storage.Store(ctx, s.key(days[i]), data)
		}
		if err != nil {
			ok = false
			s.logger.Error("saving the ledger", zap.String("key", s.key(days[i])), zap.Error(err))
		}
	}
	return journalSeq, ok
}

func storeBucket(b *bucket) storedBucket {
	sb := storedBucket{Start: b.start.Unix(), DurationMS: b.dur.Milliseconds(), SelfGPUSeconds: b.selfSecs,
		CloudGPUSeconds: b.cloudGS, PeakGPUs: b.peak, PromptTokens: b.promptTokens, CompletionTokens: b.completionTokens,
		TokenClasses: b.classes, SelfTokens: b.selfTokens, CloudUSD: b.cloudUSD, Clients: slices.Clone(b.clients)}
	if b.shadow.Requests > 0 {
		v := b.shadow
		sb.Shadow = &v
	}
	return sb
}

// load reads back the last 31 days before t into an empty ledger, and
// returns the last record of the journal each day includes. A day that
// cannot be read as a ledger is logged and set aside under another key,
// never deleted, and the ledger goes on without it.
func (l *Ledger) load(ctx context.Context, t time.Time) map[string]uint64 {
	s := l.store
	if s == nil {
		return nil
	}
	seqs := map[string]uint64{}
	var all []storedBucket
	first := t.UTC().Truncate(24*time.Hour).AddDate(0, 0, -30)
	for day := first; !day.After(t); day = day.Add(24 * time.Hour) {
		key := s.key(day)
		data, err := s.storage.Load(ctx, key)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			s.logger.Error("reading the ledger", zap.String("key", key), zap.Error(err))
			continue
		}
		var doc ledgerDay
		if err := json.Unmarshal(data, &doc); err != nil || doc.Version != format {
			if err == nil {
				err = fmt.Errorf("format %d, want %d", doc.Version, format)
			}
			aside := key + ".corrupt-" + strconv.FormatInt(t.Unix(), 10)
			if serr := s.storage.Store(ctx, aside, data); serr == nil {
				_ = s.storage.Delete(ctx, key)
			}
			s.logger.Error("a day of the ledger could not be read; set aside, the ledger goes on without it",
				zap.String("key", key), zap.String("set_aside_as", aside), zap.Error(err))
			continue
		}
		all = append(all, doc.Buckets...)
		seqs[day.Format(time.DateOnly)] = doc.JournalSeq
	}
	slices.SortFunc(all, func(a, b storedBucket) int { return int(a.Start - b.Start) })
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sb := range all {
		start := time.Unix(sb.Start, 0)
		if t.Sub(start) > Buckets*BucketSize {
			continue
		}
		b := l.bucketLocked(start)
		b.dur += time.Duration(sb.DurationMS) * time.Millisecond
		b.selfSecs += sb.SelfGPUSeconds
		b.cloudGS += sb.CloudGPUSeconds
		b.peak = max(b.peak, sb.PeakGPUs)
		b.promptTokens += sb.PromptTokens
		b.completionTokens += sb.CompletionTokens
		b.classes.add(sb.TokenClasses)
		b.selfTokens += sb.SelfTokens
		b.cloudUSD += sb.CloudUSD
		if sb.Shadow != nil {
			b.shadow = *sb.Shadow
		}
		b.clients = append(b.clients, sb.Clients...)
	}
	return seqs
}
