// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

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
var probers = reload.NewPool[*prober]()

// probeSettings is what one user (a group of one config) asks of a prober.
type probeSettings struct {
	healthInterval  time.Duration
	metricsInterval time.Duration
	modelsInterval  time.Duration
	timeout         time.Duration
	ttftWindow      time.Duration
	apiKey          string
	expect          []string // served model names that must be listed
	rise, fall      int      // health probes in a row that bring an endpoint up, take it down

	// the group's own transport (its TLS, client certificates, proxy
	// settings); nil: a plain HTTP transport of the prober's own
	transport http.RoundTripper
	seq       uint64 // registration order: the newest owner's transport wins
}

// health states of an endpoint.
const (
	healthUnknown int32 = iota
	healthUp
	healthDown
)

// probeSnapshot is an immutable view of what the probes last saw. Readers
// load it atomically; writers replace it whole.
type probeSnapshot struct {
	health    int32
	healthErr string
	healthAt  time.Time

	models     map[string]int // served model id -> max_model_len (0: not reported)
	anyMissing bool           // an expected model name is not served
	modelsErr  string
	modelsAt   time.Time

	loads      map[string]*vllmmetrics.ModelLoad // by model_name label
	single     *vllmmetrics.ModelLoad            // the load when the server has one model
	metricsErr string
	metricsAt  time.Time
	// the gateway's in-flight count when the scrape completed: requests
	// sent or finished since then are not in vLLM's gauges yet
	inflightAtScrape int64

	ttftP50, ttftP99 float64 // seconds, over the TTFT window; NaN without data
}

// prober polls one vLLM endpoint: /health, /v1/models and /metrics.
type prober struct {
	base string // scheme://host:port

	// inflight is the gateway's own count of requests in flight to this
	// endpoint: the instant signal, and the red line's counter
	inflight atomic.Int64

	snap     atomic.Pointer[probeSnapshot]
	settings atomic.Pointer[probeSettings]
	born     time.Time

	mu     sync.Mutex // guards owners, ttft and snapshot writes
	owners map[any]probeSettings
	ttft   vllmmetrics.Window
	missed map[string]bool // expected names found missing, logged once

	// health probes done, and the number of the last one that failed:
	// the breakers read how many passed in a row since they opened
	healthSeq atomic.Uint64
	failSeq   atomic.Uint64
	okRun     int // health probes passed in a row (the health loop's)
	failRun   int // and failed in a row

	own       *http.Client // over the prober's own transport
	client    atomic.Pointer[http.Client]
	transport http.RoundTripper // the transport client uses; guarded by mu
	regSeq    uint64            // guarded by mu
	logger    *zap.Logger
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	wake      [3]chan struct{} // health, metrics, models: probe now
	started   atomic.Bool
	life      sync.Mutex // orders begin and Destruct
	stopped   bool       // destructed: begin does nothing

	badMetrics lograte.Every // rate-limits the warning about invalid metric values
	clock      clock.Clock   // of its snapshots: its first owner's

	// the answers under way from the endpoint, cut when the health
	// probes take it down (see watchdog)
	streams [streamShards]streamShard
}

// acquireProber returns the prober of the endpoint, creating and starting
// it if no config uses it yet, and registers owner's settings. Call
// releaseProber with the same owner when done.
func acquireProber(base string, owner any, s probeSettings, c clock.Clock, logger *zap.Logger) (*prober, error) {
	p, _, err := probers.Acquire(base, func() (*prober, error) {
		return newProber(base, c, logger), nil
	})
	if err != nil {
		return nil, err
	}
	p.register(owner, s)
	return p, nil
}

// releaseProber drops owner's settings and its reference; the prober stops
// when nothing uses it.
func releaseProber(p *prober, owner any) {
	p.unregister(owner)
	_ = probers.Release(p.base)
}

func newProber(base string, c clock.Clock, logger *zap.Logger) *prober {
	p := &prober{
		base:   base,
		born:   c.Now(),
		clock:  c,
		owners: make(map[any]probeSettings),
		missed: make(map[string]bool),
		own: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil,
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     time.Minute,
			},
			CheckRedirect: noRedirect,
		},
		logger: logger.With(zap.String("endpoint", base)),
		wake:   [3]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)},
	}
	p.client.Store(p.own)
	p.snap.Store(&probeSnapshot{ttftP50: math.NaN(), ttftP99: math.NaN()})
	return p
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// register merges the owner's settings into the effective ones: the
// shortest intervals win and the expected model names are the union.
func (p *prober) register(owner any, s probeSettings) {
	p.mu.Lock()
	p.regSeq++
	s.seq = p.regSeq
	p.owners[owner] = s
	p.applySettingsLocked()
	p.mu.Unlock()
}

// begin starts the probes, once: a gateway's when its config starts
// running (never for a config that is only validated), the standalone
// policy's at once.
func (p *prober) begin() {
	p.life.Lock()
	defer p.life.Unlock()
	if !p.stopped && p.started.CompareAndSwap(false, true) {
		p.start()
	}
}

func (p *prober) unregister(owner any) {
	p.mu.Lock()
	delete(p.owners, owner)
	if len(p.owners) > 0 {
		p.applySettingsLocked()
	}
	p.mu.Unlock()
}

func (p *prober) applySettingsLocked() {
	var eff probeSettings
	expect := make(map[string]bool)
	first := true
	var transport http.RoundTripper
	var newest uint64
	for _, s := range p.owners {
		// the newest owner's transport: after a reload, the new config's
		if s.seq >= newest {
			transport, newest = s.transport, s.seq
		}
		if first {
			eff = s
			first = false
		} else {
			eff.healthInterval = min(eff.healthInterval, s.healthInterval)
			eff.metricsInterval = min(eff.metricsInterval, s.metricsInterval)
			eff.modelsInterval = min(eff.modelsInterval, s.modelsInterval)
			eff.timeout = max(eff.timeout, s.timeout)
			eff.ttftWindow = max(eff.ttftWindow, s.ttftWindow)
			eff.rise = max(eff.rise, s.rise)
			eff.fall = max(eff.fall, s.fall)
			if eff.apiKey == "" {
				eff.apiKey = s.apiKey
			}
		}
		for _, m := range s.expect {
			expect[m] = true
		}
	}
	eff.expect = slices.Sorted(maps.Keys(expect))
	eff.transport, eff.seq = transport, newest
	if transport != p.transport {
		p.transport = transport
		c := p.own
		if transport != nil {
			c = &http.Client{Transport: transport, CheckRedirect: noRedirect}
		}
		p.client.Store(c)
	}
	prev := p.settings.Swap(&eff)
	if prev == nil {
		return
	}
	wake := func(i int) {
		select {
		case p.wake[i] <- struct{}{}:
		default:
		}
	}
	// a shorter interval applies now, not once the longer one has run out
	if eff.healthInterval < prev.healthInterval {
		wake(0)
	}
	if eff.metricsInterval < prev.metricsInterval {
		wake(1)
	}
	if eff.modelsInterval < prev.modelsInterval || !slices.Equal(prev.expect, eff.expect) {
		wake(2) // and check the models against the new names now
	}
}

// Destruct stops the probes; the UsagePool calls it when no config uses
// the endpoint any more.
func (p *prober) Destruct() error {
	p.life.Lock()
	p.stopped = true
	cancel := p.cancel
	p.life.Unlock()
	if cancel != nil {
		cancel()
		p.wg.Wait()
	}
	p.own.CloseIdleConnections() // a group's transport is its proxy's to close
	return nil
}

func (p *prober) start() {
	ctx, cancel := context.WithCancel(context.Background())
	// what a group's Caddy transport reads from a request's context (its
	// TLS server name may hold placeholders), as Caddy's health checks do
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	p.cancel = cancel
	probe := func(name string, interval func(*probeSettings) time.Duration, run func(context.Context), wake <-chan struct{}) {
		loop.Loop{Name: "probe", Pause: func() time.Duration { return interval(p.settings.Load()) }, Wake: wake,
			When: loop.AtStart, Logger: p.logger.With(zap.String("probe", name))}.Go(ctx, &p.wg, run)
	}
	probe("health", func(s *probeSettings) time.Duration { return s.healthInterval }, p.probeHealth, p.wake[0])
	probe("metrics", func(s *probeSettings) time.Duration { return s.metricsInterval }, p.probeMetrics, p.wake[1])
	probe("models", func(s *probeSettings) time.Duration { return s.modelsInterval }, p.probeModels, p.wake[2])
}

// update replaces the snapshot with a modified copy.
func (p *prober) update(f func(*probeSnapshot)) {
	p.mu.Lock()
	next := *p.snap.Load()
	f(&next)
	p.snap.Store(&next)
	p.mu.Unlock()
}

// get sends a probe's GET for path to the endpoint, without credentials.
func (p *prober) get(ctx context.Context, path string) (*http.Response, error) {
	return p.send(ctx, p.settings.Load(), path, "")
}

// getAuthorized is get with the endpoint's API key, if it has one.
func (p *prober) getAuthorized(ctx context.Context, path string) (*http.Response, error) {
	s := p.settings.Load()
	return p.send(ctx, s, path, s.apiKey)
}

// send sends a GET for path under the probe timeout of s, with apiKey as
// its bearer token unless empty.
func (p *prober) send(ctx context.Context, s *probeSettings, path, apiKey string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := p.client.Load().Do(req)
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

// probeHealth: 200 passes; anything else, a refused connection (a booting
// vLLM) or a timeout fails. The first probe decides the state; after that
// `fall` failures in a row take the endpoint down and `rise` passes in a
// row bring it back, so that one slow answer does not flap it.
func (p *prober) probeHealth(ctx context.Context) {
	state, reason := healthDown, ""
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
			state = healthUp
		} else {
			reason = "status " + strconv.Itoa(resp.StatusCode)
		}
	}
	seq := p.healthSeq.Load() + 1
	if state != healthUp {
		p.failSeq.Store(seq)
		p.okRun, p.failRun = 0, p.failRun+1
	} else {
		p.okRun, p.failRun = p.okRun+1, 0
	}
	p.healthSeq.Store(seq)
	set := p.settings.Load()
	prev := p.snap.Load().health
	switch {
	case prev == healthUnknown:
	case state == healthUp && prev == healthDown && p.okRun < max(set.rise, 1):
		state = healthDown // not yet risen
	case state == healthDown && prev == healthUp && p.failRun < max(set.fall, 1):
		state, reason = healthUp, "" // not yet fallen
	}
	p.update(func(s *probeSnapshot) {
		s.health, s.healthAt = state, p.clock.Now()
		if state == healthDown && reason != "" {
			s.healthErr = reason
		} else if state == healthUp {
			s.healthErr = ""
		}
	})
	if prev != state {
		if state == healthUp {
			p.logger.Info("vLLM endpoint is up")
		} else {
			p.logger.Warn("vLLM endpoint is down", zap.String("reason", reason))
		}
	}
	if p.failRun > 0 {
		// a frozen vLLM fails its probes and sends nothing: once it is
		// down, what it has not sent a byte of since the last failed
		// probe is cut; what still streams finishes (or meets idle_timeout)
		if state == healthDown {
			p.cutStreams()
		} else {
			p.markStreams()
		}
	}
}

// HealthPassedSince returns how many health probes in a row have passed
// after the probe numbered mark.
func (p *prober) HealthPassedSince(mark uint64) uint64 {
	seq, last := p.healthSeq.Load(), max(mark, p.failSeq.Load())
	if seq < last {
		return 0
	}
	return seq - last
}

// probeModels records the served model names with their max_model_len and
// checks the expected names against them.
func (p *prober) probeModels(ctx context.Context) {
	resp, err := p.getAuthorized(ctx, "/v1/models")
	if err != nil {
		if ctx.Err() == nil {
			p.update(func(s *probeSnapshot) { s.modelsErr = probeErrReason(err) })
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
		p.update(func(s *probeSnapshot) { s.modelsErr = reason })
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
	for _, want := range p.settings.Load().expect {
		if _, ok := models[want]; !ok {
			anyMissing = true
		}
	}
	p.update(func(s *probeSnapshot) {
		s.models, s.anyMissing, s.modelsErr, s.modelsAt = models, anyMissing, "", p.clock.Now()
	})

	served := slices.Sorted(maps.Keys(models))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, want := range p.settings.Load().expect {
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

// probeMetrics scrapes /metrics and updates the load and the TTFT window.
func (p *prober) probeMetrics(ctx context.Context) {
	resp, err := p.get(ctx, "/metrics")
	if err != nil {
		if ctx.Err() == nil {
			p.update(func(s *probeSnapshot) { s.metricsErr = probeErrReason(err) })
		}
		return
	}
	var loads map[string]*vllmmetrics.ModelLoad
	if resp.StatusCode == http.StatusOK {
		var invalid string
		loads, invalid, err = vllmmetrics.Parse(resp.Body)
		if invalid != "" && p.badMetrics.Allow(p.clock.Now()) {
			p.logger.Warn("ignored invalid vLLM metric values (NaN, infinite, negative or absurd); at most one such warning a minute per endpoint",
				zap.String("endpoint", p.base), zap.String("value", invalid))
		}
	} else {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		p.update(func(s *probeSnapshot) { s.metricsErr = err.Error() })
		return
	}
	inflight := p.inflight.Load()
	t := p.clock.Now()
	p50, p99 := p.ttftWindow(t, loads)
	p.update(func(s *probeSnapshot) {
		s.loads, s.metricsErr, s.metricsAt, s.inflightAtScrape = loads, "", t, inflight
		s.single = nil
		if len(loads) == 1 {
			for _, l := range loads {
				s.single = l
			}
		}
		s.ttftP50, s.ttftP99 = p50, p99
	})
}

// ttftWindow records the scrape's TTFT histograms (all models summed) and
// returns p50 and p99 of the observations within the window.
func (p *prober) ttftWindow(t time.Time, loads map[string]*vllmmetrics.ModelLoad) (float64, float64) {
	sum := vllmmetrics.SumTTFT(loads)
	window := p.settings.Load().ttftWindow
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ttft.Observe(t, sum, window)
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
var _ caddy.Destructor = (*prober)(nil)
