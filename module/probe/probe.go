// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package probe probes vLLM endpoints: one Prober per endpoint address per
// process, shared by every config and group that uses the address and kept
// across config reloads, polls /health, /v1/models and /metrics and keeps
// what it last saw in an immutable Snapshot; it counts the gateway's
// requests in flight to the endpoint and cuts the answers under way from
// it when its health probes take it down. It imports the leaves clock,
// loop, reload, lograte and vllmmetrics, nothing else of the product.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/lograte"
	"github.com/hybridllm/caddy-hybrid-llm/module/loop"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
	"github.com/hybridllm/caddy-hybrid-llm/module/vllmmetrics"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// Probe defaults, sensible for a real vLLM.
const (
	defaultHealthInterval  = 2 * time.Second
	defaultMetricsInterval = 500 * time.Millisecond
	defaultModelsInterval  = 30 * time.Second
	defaultProbeTimeout    = time.Second
	defaultTTFTWindow      = 30 * time.Second
	defaultRise            = 2
	defaultFall            = 2
)

// probers holds one prober per vLLM endpoint address per process, shared
// by every handler that uses the address and kept across config reloads.
var probers = reload.NewPool[*Prober]()

// Settings is what one user (a group of one config) asks of a prober.
type Settings struct {
	HealthInterval  time.Duration
	MetricsInterval time.Duration
	ModelsInterval  time.Duration
	Timeout         time.Duration
	TTFTWindow      time.Duration
	APIKey          string
	Expect          []string // served model names that must be listed
	Rise, Fall      int      // health probes in a row that bring an endpoint up, take it down

	// the group's own Transport (its TLS, client certificates, proxy
	// settings); nil: a plain HTTP Transport of the prober's own
	Transport http.RoundTripper
	seq       uint64 // registration order: the newest owner's transport wins
}

// health states of an endpoint.
const (
	HealthUnknown int32 = iota
	HealthUp
	HealthDown
)

// Snapshot is an immutable view of what the probes last saw. Readers
// load it atomically; writers replace it whole.
type Snapshot struct {
	Health    int32
	HealthErr string
	HealthAt  time.Time

	Models     map[string]int // served model id -> max_model_len (0: not reported)
	AnyMissing bool           // an expected model name is not served
	ModelsErr  string
	ModelsAt   time.Time

	Loads      map[string]*vllmmetrics.ModelLoad // by model_name label
	Single     *vllmmetrics.ModelLoad            // the load when the server has one model
	MetricsErr string
	MetricsAt  time.Time
	// the gateway's in-flight count when the scrape completed: requests
	// sent or finished since then are not in vLLM's gauges yet
	InflightAtScrape int64

	TTFTP50, TTFTP99 float64 // seconds, over the TTFT window; NaN without data
}

// LoadFor returns the load of a model: the only model of the server, or
// the series labelled with its name.
func (s *Snapshot) LoadFor(model string) *vllmmetrics.ModelLoad {
	if s.Single != nil {
		return s.Single
	}
	return s.Loads[model]
}

// Prober polls one vLLM endpoint: /health, /v1/models and /metrics.
type Prober struct {
	base string // scheme://host:port

	// Inflight is the gateway's own count of requests in flight to this
	// endpoint: the instant signal, and the red line's counter
	Inflight atomic.Int64

	snap     atomic.Pointer[Snapshot]
	settings atomic.Pointer[Settings]
	born     time.Time

	mu      sync.Mutex // guards owners, http, ttft and snapshot writes
	owners  probeOwners
	missed  map[string]bool // expected names found missing, logged once
	metrics scrapes

	health healthRun
	http   probeClient // guarded by mu but for its client
	logger *zap.Logger
	loops  probeLoops

	clock clock.Clock // of its snapshots: its first owner's

	// the answers under way from the endpoint, cut when the health
	// probes take it down (see Stream)
	streams [Shards]streamShard
}

// healthRun is the health probes' count: those done, the number of the
// last one that failed (the breakers read how many passed in a row since
// they opened), and the runs in a row the health loop keeps.
type healthRun struct {
	seq, failSeq atomic.Uint64
	okRun        int // passed in a row
	failRun      int // and failed in a row
}

// probeClient is what the probes are sent over.
type probeClient struct {
	own       *http.Client // over the prober's own transport
	client    atomic.Pointer[http.Client]
	transport http.RoundTripper // the transport client uses
}

// probeOwners are the settings each user of the prober registered.
type probeOwners struct {
	m   map[any]Settings
	seq uint64 // the registrations so far
}

// scrapes is what the metrics probe keeps between scrapes.
type scrapes struct {
	ttft vllmmetrics.Window // guarded by the prober's mu
	bad  lograte.Every      // rate-limits the warning about invalid metric values
}

// probeLoops are the prober's three loops: health, metrics, models.
type probeLoops struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	wake    [3]chan struct{} // probe now
	started atomic.Bool
	life    sync.Mutex // orders Begin and Destruct
	stopped bool       // destructed: Begin does nothing
}

// Snapshot returns what the probes last saw.
func (p *Prober) Snapshot() *Snapshot { return p.snap.Load() }

// Reserve takes one of the endpoint's in-flight slots unless limit (its
// red line; 0: none) is reached; the taker gives it back with
// Inflight.Add(-1).
func (p *Prober) Reserve(limit int64) bool {
	for {
		cur := p.Inflight.Load()
		if limit != 0 && cur >= limit {
			return false
		}
		if p.Inflight.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

// HealthSeq returns the number of health probes done so far.
func (p *Prober) HealthSeq() uint64 { return p.health.seq.Load() }

// Born returns when the prober was made: until its first scrape, an
// endpoint's metrics are not stale yet.
func (p *Prober) Born() time.Time { return p.born }

// Acquire returns the prober of the endpoint, creating and starting
// it if no config uses it yet, and registers owner's settings. Call
// releaseProber with the same owner when done.
func Acquire(base string, owner any, s Settings, c clock.Clock, logger *zap.Logger) (*Prober, error) {
	p, _, err := probers.Acquire(base, func() (*Prober, error) {
		return New(base, c, logger), nil
	})
	if err != nil {
		return nil, err
	}
	p.Register(owner, s)
	return p, nil
}

// Release drops owner's settings and its reference; the prober stops
// when nothing uses it.
func Release(p *Prober, owner any) {
	p.unregister(owner)
	_ = probers.Release(p.base)
}

// Holds returns how many users hold the prober of the endpoint at base:
// 0 once the last has released it.
func Holds(base string) int { return probers.Holds(base) }

// New returns a prober of the endpoint at base that no pool shares and
// that runs no loops until Begin; Acquire is how a config gets one.
func New(base string, c clock.Clock, logger *zap.Logger) *Prober {
	p := &Prober{
		base:   base,
		born:   c.Now(),
		clock:  c,
		owners: probeOwners{m: make(map[any]Settings)},
		missed: make(map[string]bool),
		logger: logger.With(zap.String("endpoint", base)),
	}
	p.http.own = &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     time.Minute,
		},
		CheckRedirect: noRedirect,
	}
	p.loops.wake = [3]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)}
	p.http.client.Store(p.http.own)
	p.snap.Store(&Snapshot{TTFTP50: math.NaN(), TTFTP99: math.NaN()})
	return p
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Register merges the owner's settings into the effective ones: the
// shortest intervals win and the expected model names are the union.
func (p *Prober) Register(owner any, s Settings) {
	p.mu.Lock()
	p.owners.seq++
	s.seq = p.owners.seq
	p.owners.m[owner] = s
	p.applySettingsLocked()
	p.mu.Unlock()
}

// Begin starts the probes, once: a gateway's when its config starts
// running (never for a config that is only validated), the standalone
// policy's at once.
func (p *Prober) Begin() {
	p.loops.life.Lock()
	defer p.loops.life.Unlock()
	if !p.loops.stopped && p.loops.started.CompareAndSwap(false, true) {
		p.start()
	}
}

func (p *Prober) unregister(owner any) {
	p.mu.Lock()
	delete(p.owners.m, owner)
	if len(p.owners.m) > 0 {
		p.applySettingsLocked()
	}
	p.mu.Unlock()
}

func (p *Prober) applySettingsLocked() {
	var eff Settings
	expect := make(map[string]bool)
	first := true
	var transport http.RoundTripper
	var newest uint64
	for _, s := range p.owners.m {
		// the newest owner's transport: after a reload, the new config's
		if s.seq >= newest {
			transport, newest = s.Transport, s.seq
		}
		if first {
			eff = s
			first = false
		} else {
			eff.HealthInterval = min(eff.HealthInterval, s.HealthInterval)
			eff.MetricsInterval = min(eff.MetricsInterval, s.MetricsInterval)
			eff.ModelsInterval = min(eff.ModelsInterval, s.ModelsInterval)
			eff.Timeout = max(eff.Timeout, s.Timeout)
			eff.TTFTWindow = max(eff.TTFTWindow, s.TTFTWindow)
			eff.Rise = max(eff.Rise, s.Rise)
			eff.Fall = max(eff.Fall, s.Fall)
			if eff.APIKey == "" {
				eff.APIKey = s.APIKey
			}
		}
		for _, m := range s.Expect {
			expect[m] = true
		}
	}
	eff.Expect = slices.Sorted(maps.Keys(expect))
	eff.Transport, eff.seq = transport, newest
	if transport != p.http.transport {
		p.http.transport = transport
		c := p.http.own
		if transport != nil {
			c = &http.Client{Transport: transport, CheckRedirect: noRedirect}
		}
		p.http.client.Store(c)
	}
	prev := p.settings.Swap(&eff)
	if prev == nil {
		return
	}
	wake := func(i int) {
		select {
		case p.loops.wake[i] <- struct{}{}:
		default:
		}
	}
	// a shorter interval applies now, not once the longer one has run out
	if eff.HealthInterval < prev.HealthInterval {
		wake(0)
	}
	if eff.MetricsInterval < prev.MetricsInterval {
		wake(1)
	}
	if eff.ModelsInterval < prev.ModelsInterval || !slices.Equal(prev.Expect, eff.Expect) {
		wake(2) // and check the models against the new names now
	}
}

// Destruct stops the probes; the UsagePool calls it when no config uses
// the endpoint any more.
func (p *Prober) Destruct() error {
	p.loops.life.Lock()
	p.loops.stopped = true
	cancel := p.loops.cancel
	p.loops.life.Unlock()
	if cancel != nil {
		cancel()
		p.loops.wg.Wait()
	}
	p.http.own.CloseIdleConnections() // a group's transport is its proxy's to close
	return nil
}

func (p *Prober) start() {
	ctx, cancel := context.WithCancel(context.Background())
	// what a group's Caddy transport reads from a request's context (its
	// TLS server name may hold placeholders), as Caddy's health checks do
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	p.loops.cancel = cancel
	probe := func(name string, interval func(*Settings) time.Duration, run func(context.Context), wake <-chan struct{}) {
		loop.Loop{Name: "probe", Pause: func() time.Duration { return interval(p.settings.Load()) }, Wake: wake,
			When: loop.AtStart, Logger: p.logger.With(zap.String("probe", name))}.Go(ctx, &p.loops.wg, run)
	}
	probe("health", func(s *Settings) time.Duration { return s.HealthInterval }, p.ProbeHealth, p.loops.wake[0])
	probe("metrics", func(s *Settings) time.Duration { return s.MetricsInterval }, p.ProbeMetrics, p.loops.wake[1])
	probe("models", func(s *Settings) time.Duration { return s.ModelsInterval }, p.ProbeModels, p.loops.wake[2])
}

// Update replaces the snapshot with a modified copy.
func (p *Prober) Update(f func(*Snapshot)) {
	p.mu.Lock()
	next := *p.snap.Load()
	f(&next)
	p.snap.Store(&next)
	p.mu.Unlock()
}

// get sends a probe's GET for path to the endpoint, without credentials.
func (p *Prober) get(ctx context.Context, path string) (*http.Response, error) {
	return p.send(ctx, p.settings.Load(), path, "")
}

// getAuthorized is get with the endpoint's API key, if it has one.
func (p *Prober) getAuthorized(ctx context.Context, path string) (*http.Response, error) {
	s := p.settings.Load()
	return p.send(ctx, s, path, s.APIKey)
}

// send sends a GET for path under the probe timeout of s, with apiKey as
// its bearer token unless empty.
func (p *Prober) send(ctx context.Context, s *Settings, path, apiKey string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := p.http.client.Load().Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// ProbeHealth: 200 passes; anything else, a refused connection (a booting
// vLLM) or a timeout fails. The first probe decides the state; after that
// `fall` failures in a row take the endpoint down and `rise` passes in a
// row bring it back, so that one slow answer does not flap it.
func (p *Prober) ProbeHealth(ctx context.Context) {
	state, reason := HealthDown, ""
	resp, err := p.get(ctx, "/health")
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return
		}
		reason = probeErrReason(err)
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			state = HealthUp
		} else {
			reason = "status " + strconv.Itoa(resp.StatusCode)
		}
	}
	seq := p.health.seq.Load() + 1
	if state != HealthUp {
		p.health.failSeq.Store(seq)
		p.health.okRun, p.health.failRun = 0, p.health.failRun+1
	} else {
		p.health.okRun, p.health.failRun = p.health.okRun+1, 0
	}
	p.health.seq.Store(seq)
	set := p.settings.Load()
	prev := p.snap.Load().Health
	switch {
	case prev == HealthUnknown:
	case state == HealthUp && prev == HealthDown && p.health.okRun < max(set.Rise, 1):
		state = HealthDown // not yet risen
	case state == HealthDown && prev == HealthUp && p.health.failRun < max(set.Fall, 1):
		state, reason = HealthUp, "" // not yet fallen
	}
	p.Update(func(s *Snapshot) {
		s.Health, s.HealthAt = state, p.clock.Now()
		if state == HealthDown && reason != "" {
			s.HealthErr = reason
		} else if state == HealthUp {
			s.HealthErr = ""
		}
	})
	if prev != state {
		if state == HealthUp {
			p.logger.Info("vLLM endpoint is up")
		} else {
			p.logger.Warn("vLLM endpoint is down", zap.String("reason", reason))
		}
	}
	if p.health.failRun > 0 {
		// a frozen vLLM fails its probes and sends nothing: once it is
		// down, what it has not sent a byte of since the last failed
		// probe is cut; what still streams finishes (or meets idle_timeout)
		if state == HealthDown {
			p.cutStreams()
		} else {
			p.markStreams()
		}
	}
}

// HealthPassedSince returns how many health probes in a row have passed
// after the probe numbered mark.
func (p *Prober) HealthPassedSince(mark uint64) uint64 {
	seq, last := p.health.seq.Load(), max(mark, p.health.failSeq.Load())
	if seq < last {
		return 0
	}
	return seq - last
}

// ProbeModels records the served model names with their max_model_len and
// checks the expected names against them.
func (p *Prober) ProbeModels(ctx context.Context) {
	resp, err := p.getAuthorized(ctx, "/v1/models")
	if err != nil {
		if ctx.Err() == nil {
			p.Update(func(s *Snapshot) { s.ModelsErr = probeErrReason(err) })
		}
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !gjson.ValidBytes(body) {
		reason := "status " + strconv.Itoa(resp.StatusCode)
		if resp.StatusCode == http.StatusOK {
			reason = "invalid model list"
		}
		p.Update(func(s *Snapshot) { s.ModelsErr = reason })
		return
	}
	models := make(map[string]int)
	gjson.GetBytes(body, "data").ForEach(func(_, card gjson.Result) bool {
		if id := card.Get("id").String(); id != "" {
			models[id] = int(card.Get("max_model_len").Int())
		}
		return true
	})
	anyMissing := false
	for _, want := range p.settings.Load().Expect {
		if _, ok := models[want]; !ok {
			anyMissing = true
		}
	}
	p.Update(func(s *Snapshot) {
		s.Models, s.AnyMissing, s.ModelsErr, s.ModelsAt = models, anyMissing, "", p.clock.Now()
	})

	served := slices.Sorted(maps.Keys(models))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, want := range p.settings.Load().Expect {
		_, ok := models[want]
		switch {
		case !ok && !p.missed[want]:
			p.missed[want] = true
			p.logger.Error("vLLM endpoint is misconfigured: it does not serve the configured model name; it gets no requests for it",
				zap.String("model", want), zap.Strings("served", served))
		case ok && p.missed[want]:
			delete(p.missed, want)
			p.logger.Info("vLLM endpoint serves the configured model name again", zap.String("model", want))
		}
	}
}

// MarkMissing marks the endpoint as not serving model at once, after it
// answered that the model does not exist, and wakes its /v1/models probe,
// whose answer confirms or clears the mark. Until a /v1/models probe
// succeeds, the other expected names count as served.
func (p *Prober) MarkMissing(model string) {
	p.mu.Lock()
	next := *p.snap.Load()
	_, listed := next.Models[model]
	if listed || next.Models == nil {
		models := maps.Clone(next.Models)
		if models == nil {
			models = make(map[string]int)
			for _, m := range p.settings.Load().Expect {
				models[m] = 0 // max_model_len unknown
			}
		}
		delete(models, model)
		next.Models, next.AnyMissing = models, true
		p.snap.Store(&next)
	}
	// the probe's confirmation is not logged again; its clearing is
	p.missed[model] = true
	p.mu.Unlock()
	select {
	case p.loops.wake[2] <- struct{}{}:
	default:
	}
}

// ProbeMetrics scrapes /metrics and updates the load and the TTFT window.
func (p *Prober) ProbeMetrics(ctx context.Context) {
	resp, err := p.get(ctx, "/metrics")
	if err != nil {
		if ctx.Err() == nil {
			p.Update(func(s *Snapshot) { s.MetricsErr = probeErrReason(err) })
		}
		return
	}
	var loads map[string]*vllmmetrics.ModelLoad
	if resp.StatusCode == http.StatusOK {
		var invalid string
		loads, invalid, err = vllmmetrics.Parse(resp.Body)
		if invalid != "" && p.metrics.bad.Allow(p.clock.Now()) {
			p.logger.Warn("ignored invalid vLLM metric values (NaN, infinite, negative or absurd); at most one such warning a minute per endpoint",
				zap.String("endpoint", p.base), zap.String("value", invalid))
		}
	} else {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		p.Update(func(s *Snapshot) { s.MetricsErr = err.Error() })
		return
	}
	inflight := p.Inflight.Load()
	t := p.clock.Now()
	p50, p99 := p.ttftWindow(t, loads)
	p.Update(func(s *Snapshot) {
		s.Loads, s.MetricsErr, s.MetricsAt, s.InflightAtScrape = loads, "", t, inflight
		s.Single = nil
		if len(loads) == 1 {
			for _, l := range loads {
				s.Single = l
			}
		}
		s.TTFTP50, s.TTFTP99 = p50, p99
	})
}

// ttftWindow records the scrape's TTFT histograms (all models summed) and
// returns p50 and p99 of the observations within the window.
func (p *Prober) ttftWindow(t time.Time, loads map[string]*vllmmetrics.ModelLoad) (float64, float64) {
	sum := vllmmetrics.SumTTFT(loads)
	window := p.settings.Load().TTFTWindow
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.metrics.ttft.Observe(t, sum, window)
}

// probeErrReason names a probe failure without an address.
func probeErrReason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return "timeout"
	}
	return "unreachable"
}

// Interface guards
var _ caddy.Destructor = (*Prober)(nil)
