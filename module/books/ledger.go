// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package books

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/cost"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// The live ledger: the demand in GPU equivalents and how it was split,
// the tokens, the spend and each client's share, in one-minute buckets for
// 31 days, across config reloads and, through Caddy's storage, restarts.
const (
	// BucketSize is the span of one bucket of the ledger.
	BucketSize = time.Minute
	// Buckets is how many buckets the ledger holds: 31 days.
	Buckets = 31 * 24 * 60

	sampleEvery = time.Second
)

// bucket is one bucket of the ledger.
type bucket struct {
	start             time.Time
	dur               time.Duration
	selfSecs, cloudGS float64 // GPU-equivalent seconds
	peak              float64
	promptTokens      int64
	completionTokens  int64
	classes           TokenClasses // within the prompt and the completion
	selfTokens        int64
	cloudUSD          float64
	shadow            cost.Validation // mirror copies, outside the business bill
	clients           []ClientUse     // each client's share, with clients
}

// in reports whether the bucket falls in [from, to): a window takes the
// bucket its start is in, and the unfinished one it ends in.
func (b *bucket) in(from, to time.Time) bool {
	return !b.start.Before(from.Truncate(BucketSize)) && b.start.Before(to)
}

// Config is what a gateway's books need of it.
type Config struct {
	// Gateway is the gateway's name: the books are kept by it.
	Gateway string
	// Storage is Caddy's; nil keeps the ledger in memory only.
	Storage certmagic.Storage
	// Owns says this process writes the gateway's books (it holds their
	// lock): only then is the ledger read back, saved and journaled.
	Owns bool
	// SelfGPUs are the self-hosted GPUs with a cost model: the demand
	// beyond them waits in vLLM's queues.
	SelfGPUs float64
	// Spend is the gateway's cloud spend book, nil when nothing bounds
	// the spend (no clients, no spend cap).
	Spend *SpendBook
	// Fleet says the spend is kept in a registry, not in storage.
	Fleet  bool
	Clock  clock.Clock
	Logger *zap.Logger
}

// withDefaults is c with a logger that discards when it has none.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Ledger is a gateway's record of demand and spend; it lives in shared
// state (by gateway name) so that it outlives reloads.
type Ledger struct {
	mu      sync.Mutex
	buckets []bucket // ring, oldest first once full
	next    int
	clock   clock.Clock // the first config's; the ledger outlives reloads
	sampler struct {
		cancel context.CancelFunc
		wg     sync.WaitGroup
	}
	perToken cached // see PerToken

	// the demand now, in GPU equivalents (see Occupy), and when it was
	// last integrated into the buckets
	curSelf, curCloud float64
	lastAt            time.Time
	// the self-hosted GPUs: what self-hosted requests in flight beyond
	// them wait in vLLM's queues, demand the GPUs are not serving
	selfGPUs float64
	// where it persists, and from when it has not been saved yet
	store   *store
	savedAt time.Time
	// with file_system storage: every change, as it happens (see
	// journal.go), and the demand journaled up to when
	journal     *journal.Journal
	journaledAt time.Time
}

var ledgers = reload.NewPool[*Ledger]()

// Destruct stops the ledger's sampler and saves its last minutes.
func (l *Ledger) Destruct() error {
	if l.sampler.cancel != nil {
		l.sampler.cancel()
		l.sampler.wg.Wait()
	}
	// the last minutes, for the next start
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t := l.clock.Now()
	l.mu.Lock()
	l.advanceLocked(t)
	l.mu.Unlock()
	l.Save(ctx, l.savedAt, t)
	if l.journal != nil {
		// what came after the save is in it, for the next start
		l.journal.Close()
	}
	return nil
}

// Open returns a gateway's ledger as a process starts it, without its
// sampler: with storage it owns, what Caddy's storage keeps of the
// gateway's last 31 days read back, then the journal's records after
// them (into the spend book too).
func Open(c Config) *Ledger {
	c = c.withDefaults()
	l := &Ledger{clock: c.Clock, selfGPUs: c.SelfGPUs}
	if c.Storage != nil && c.Owns {
		l.store = newStore(c.Storage, c.Gateway, InstanceName(), c.Logger)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l.savedAt = l.clock.Now()
		days := l.load(ctx, l.savedAt)
		cancel()
		l.startJournal(c, days)
	}
	return l
}

// Acquire returns the gateway's ledger, starting its sampler; a new one
// is opened (see Open). Release lets it go.
func Acquire(c Config) *Ledger {
	c = c.withDefaults()
	l, made, _ := ledgers.Acquire(c.Gateway, func() (*Ledger, error) { return Open(c), nil })
	l.mu.Lock()
	l.advanceLocked(l.clock.Now())
	l.selfGPUs = c.SelfGPUs
	l.mu.Unlock()
	if made {
		ctx, cancel := context.WithCancel(context.Background())
		l.sampler.cancel = cancel
		var ticks int
		loop.Loop{Name: "ledger sampler", Every: sampleEvery, Logger: c.Logger}.Go(ctx, &l.sampler.wg, func(ctx context.Context) {
			if ticks++; ticks%int(saveEvery/sampleEvery) == 0 {
				l.sampleAndSave(ctx)
			} else {
				l.sample()
			}
		})
	}
	return l
}

// Release lets a gateway's ledger go: the last config of the gateway to
// release it stops it.
func Release(gateway string) { _ = ledgers.Release(gateway) }

// Journal is the ledger's journal, nil without one.
func (l *Ledger) Journal() *journal.Journal { return l.journal }

// Clock is the ledger's clock.
func (l *Ledger) Clock() clock.Clock { return l.clock }

// sample brings the buckets up to date (between the attempts' starts and
// ends, which integrate the demand) and syncs the journal.
func (l *Ledger) sample() {
	l.Tick(l.clock.Now())
	if j := l.journal; j != nil {
		j.Sync()
	}
}

// sampleAndSave brings the buckets up to date and saves them, then lets
// the journal go of what the save includes.
func (l *Ledger) sampleAndSave(ctx context.Context) {
	at := l.clock.Now()
	l.Tick(at)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	covered, ok := l.Save(sctx, l.savedAt, at)
	cancel()
	if ok {
		// a failed save is tried again from the same time
		l.savedAt = at
	}
	if j := l.journal; j != nil && ok {
		j.SavedLedger(covered)
		j.Compact()
	}
}

// Tick brings the buckets up to t: the time since the last attempt began
// or ended, at the demand then; and journals the demand, when there is a
// journal.
func (l *Ledger) Tick(t time.Time) {
	j := l.journal
	if j == nil {
		l.mu.Lock()
		l.advanceLocked(t)
		l.mu.Unlock()
		return
	}
	j.Lock()
	l.mu.Lock()
	l.advanceLocked(t)
	l.journalDemandLocked(j)
	l.mu.Unlock()
	j.Unlock()
}

// Add records a finished request's tokens and cloud cost, or a mirror
// copy's, at t. With a journal, the caller appends the charge to it
// under its lock (see journal.Journal.AppendChargeLocked).
func (l *Ledger) Add(t time.Time, c journal.Charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bucketLocked(t).addCharge(c)
}

// addCharge records a request, or a mirror copy, in bucket b.
func (b *bucket) addCharge(c journal.Charge) {
	if c.Shadow {
		b.shadow.Requests++
		b.shadow.PromptTokens += c.Prompt
		b.shadow.CompletionTokens += c.Completion
		b.shadow.USD += c.CloudUSD
		return
	}
	if c.Client != "" {
		b.addClient(c)
	}
	b.promptTokens += c.Prompt
	b.completionTokens += c.Completion
	b.classes.add(TokenClasses{Cached: c.Cached, CacheWrite: c.CacheWrite, Reasoning: c.Reasoning})
	if c.SelfHosted {
		b.selfTokens += c.Prompt + c.Completion
	}
	b.cloudUSD += c.CloudUSD
}

// TokenClasses are the tokens within the prompts and completions counted
// apart, where the upstreams told them: the prompt's served from the
// provider's cache and written to it, the completion's spent reasoning.
type TokenClasses struct {
	Cached     int64 `json:"cached_tokens,omitempty"`
	CacheWrite int64 `json:"cache_write_tokens,omitempty"`
	Reasoning  int64 `json:"reasoning_tokens,omitempty"`
}

func (c *TokenClasses) add(o TokenClasses) {
	c.Cached += o.Cached
	c.CacheWrite += o.CacheWrite
	c.Reasoning += o.Reasoning
}

func (l *Ledger) bucketLocked(t time.Time) *bucket {
	start := t.Truncate(BucketSize)
	if n := len(l.buckets); n > 0 {
		last := &l.buckets[(l.next-1+n)%n]
		if last.start.Equal(start) {
			return last
		}
	}
	if len(l.buckets) < Buckets {
		l.buckets = append(l.buckets, bucket{start: start})
		l.next = len(l.buckets) % Buckets
		return &l.buckets[len(l.buckets)-1]
	}
	b := &l.buckets[l.next]
	*b = bucket{start: start}
	l.next = (l.next + 1) % Buckets
	return b
}

// Window is what the ledger saw in a window.
type Window struct {
	// Samples are the demand: each bucket's average, and its peak as an
	// instant.
	Samples []cost.Sample
	// Prompt, Completion and SelfTokens count the answered requests'
	// tokens, SelfTokens those served self-hosted; Classes those within
	// them.
	Prompt, Completion, SelfTokens int64
	Classes                        TokenClasses
	// CloudUSD is what the cloud cost.
	CloudUSD float64
	// Shadow is the mirror copies, outside the business bill.
	Shadow cost.Validation
}

// Window returns what the ledger saw in [from, to).
func (l *Ledger) Window(from, to time.Time) Window {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w Window
	for i := range l.buckets {
		b := &l.buckets[i]
		if !b.in(from, to) {
			continue
		}
		if b.dur > 0 {
			secs := b.dur.Seconds()
			w.Samples = append(w.Samples, cost.Sample{Dur: b.dur, Self: b.selfSecs / secs, Cloud: b.cloudGS / secs})
			if b.peak > (b.selfSecs+b.cloudGS)/secs {
				w.Samples = append(w.Samples, cost.Sample{Self: b.peak})
			}
		}
		w.Prompt += b.promptTokens
		w.Completion += b.completionTokens
		w.Classes.add(b.classes)
		w.SelfTokens += b.selfTokens
		w.CloudUSD += b.cloudUSD
		w.Shadow.Requests += b.shadow.Requests
		w.Shadow.PromptTokens += b.shadow.PromptTokens
		w.Shadow.CompletionTokens += b.shadow.CompletionTokens
		w.Shadow.USD += b.shadow.USD
	}
	return w
}

// PerToken returns a value computed at most once a second and kept on
// the ledger: the self-hosted fixed cost per token, which every answer
// reads and which a window over the last minutes gives.
func (l *Ledger) PerToken(compute func(t time.Time) float64) float64 {
	t := l.clock.Now()
	c := &l.perToken
	if at := c.at.Load(); at != 0 && t.UnixNano()-at < int64(time.Second) {
		return math.Float64frombits(c.bits.Load())
	}
	v := compute(t)
	c.bits.Store(math.Float64bits(v))
	c.at.Store(t.UnixNano())
	return v
}

// cached is a float64 and when it was computed, read without a lock.
type cached struct {
	bits atomic.Uint64 // float64 bits
	at   atomic.Int64  // Unix nanoseconds; 0: never
}

// The ledger's demand is integrated from the attempts themselves: each
// occupies its share of the GPUs from its start to its end, so that every
// request counts, however short (a sampler that looks once a second
// misses a 100 ms request).

// Occupy changes the demand at t by dSelf and dCloud GPU equivalents,
// once the demand so far is integrated up to t.
func (l *Ledger) Occupy(t time.Time, dSelf, dCloud float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(t)
	// sums of many small shares drift: what is left under a millionth of
	// a GPU is nothing
	l.curSelf, l.curCloud = snapZero(l.curSelf+dSelf), snapZero(l.curCloud+dCloud)
	b := l.bucketLocked(l.lastAt)
	b.peak = max(b.peak, l.curSelf+l.curCloud)
}

// Vacate ends what Occupy began, now.
func (l *Ledger) Vacate(dSelf, dCloud float64) { l.Occupy(l.clock.Now(), -dSelf, -dCloud) }

func snapZero(v float64) float64 {
	if v < 1e-6 {
		return 0
	}
	return v
}

// advanceLocked integrates the current demand from the last change (or
// tick) to t into the buckets it spans. l.mu is held.
func (l *Ledger) advanceLocked(t time.Time) {
	if l.lastAt.IsZero() || t.Sub(l.lastAt) > Buckets*BucketSize {
		l.lastAt = t // the first look, or back after longer than the ledger holds
		return
	}
	for l.lastAt.Before(t) {
		b := l.bucketLocked(l.lastAt)
		end := b.start.Add(BucketSize)
		if end.After(t) {
			end = t
		}
		d := end.Sub(l.lastAt)
		secs := d.Seconds()
		busy := l.curSelf
		if l.selfGPUs > 0 {
			busy = min(busy, l.selfGPUs) // the rest waits in vLLM's queues
		}
		b.dur += d
		b.selfSecs += busy * secs
		// the cloud's demand; requests waiting in vLLM's queues are not:
		// their wait is latency, the work they need counts when they run
		b.cloudGS += l.curCloud * secs
		b.peak = max(b.peak, l.curSelf+l.curCloud)
		l.lastAt = end
	}
}

// ClientUse is one client's use in a bucket or a window, as stored and
// as the admin API's ledger answers it.
type ClientUse = adminapi.ClientUse

// addClient records a client's answer in bucket b.
func (b *bucket) addClient(c journal.Charge) {
	i := slices.IndexFunc(b.clients, func(u ClientUse) bool { return u.Client == c.Client })
	if i < 0 {
		b.clients = append(b.clients, ClientUse{Client: c.Client})
		i = len(b.clients) - 1
	}
	u := &b.clients[i]
	u.PromptTokens += c.Prompt
	u.CompletionTokens += c.Completion
	if c.SelfHosted {
		u.SelfHostedTokens += c.Prompt + c.Completion
	}
	u.CloudUSD += c.CloudUSD
}

// Clients sums each client's use in [from, to), by client name.
func (l *Ledger) Clients(from, to time.Time) []ClientUse {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ClientUse
	for i := range l.buckets {
		b := &l.buckets[i]
		if !b.in(from, to) {
			continue
		}
		for _, u := range b.clients {
			i := slices.IndexFunc(out, func(o ClientUse) bool { return o.Client == u.Client })
			if i < 0 {
				out = append(out, ClientUse{Client: u.Client})
				i = len(out) - 1
			}
			o := &out[i]
			o.PromptTokens += u.PromptTokens
			o.CompletionTokens += u.CompletionTokens
			o.SelfHostedTokens += u.SelfHostedTokens
			o.CloudUSD += u.CloudUSD
		}
	}
	slices.SortFunc(out, func(a, b ClientUse) int { return strings.Compare(a.Client, b.Client) })
	return out
}
