// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Mirror copies a sampled share of an alias's requests to a target of
// its own, once the request's own targets are chosen, and throws the
// answer away after reading it to the end to meter it. The client's
// answer never waits for a mirror copy, and nothing a mirror does (slow,
// failing, hanging) reaches the request: each copy runs on its own
// context with its own timeout. Copies are metered as shadow traffic:
// `billing="shadow"` on the token and cost metrics, a validation line
// in the ledger, no client's budget and no cloud spend cap.
type Mirror struct {
	// The mirror's target; its timeout bounds each copy (default: 60s)
	// and its model name is swapped in as for any target. Set, weight,
	// health and fallback_on do not apply.
	Target

	// The share of requests copied, from 0 (exclusive) to 1.
	Ratio float64 `json:"ratio,omitempty"`

	// The most copies in flight at once; a copy beyond it is dropped
	// (and counted). Default: 32.
	MaxInFlight int `json:"max_in_flight,omitempty"`

	inflight atomic.Int64
	series   *mirrorSeries
}

// DefaultMirrorTimeout bounds a mirror copy whose target sets no timeout.
const DefaultMirrorTimeout = 60 * time.Second

// defaultMirrorInFlight is a mirror's in-flight bound when none is set.
const defaultMirrorInFlight = 32

var (
	mirrorRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "mirror_requests_total",
		Help: "Mirror copies by alias, mirror target (group, model) and outcome: ok, rejected (4xx), failed (5xx), timeout, unreachable, interrupted.",
	}, []string{"gateway", "alias", "group", "model", "outcome"})

	mirrorDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "mirror_dropped_total",
		Help: "Mirror copies not sent: the mirror had max_in_flight copies in flight, or (a vllm group) no endpoint had room to spare.",
	}, []string{"gateway", "alias", "group", "model"})

	mirrorDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "mirror_duration_seconds",
		Help:    "Time a mirror copy took to its answer's end, by alias and mirror target.",
		Buckets: requestDurationBuckets,
	}, []string{"gateway", "alias", "group", "model"})

	mirrorTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNS, Name: "mirror_ttft_seconds",
		Help:    "Time a mirror copy took to its answer's first body byte, by alias and mirror target.",
		Buckets: ttftBuckets,
	}, []string{"gateway", "alias", "group", "model"})
)

// mirrorSeries are a mirror's series, resolved at provisioning.
type mirrorSeries struct {
	dropped            prometheus.Counter
	duration, ttft     prometheus.Observer
	prompt, completion prometheus.Counter
	cost               prometheus.Counter
}

// mirrors checks the alias's mirrors.
func (s *aliasSetup) mirrors(al *Alias) error {
	for i, m := range al.Mirrors {
		if m == nil {
			return fmt.Errorf("mirror %d: empty", i)
		}
		if m.Set != "" || m.Weight != nil || m.Health != nil || m.FallbackOn != nil || m.Tier != nil || m.SLO != 0 {
			return fmt.Errorf("mirror %d (group %q): set, weight, health, fallback_on, tier and slo do not apply to a mirror", i, m.Group)
		}
		if !(m.Ratio > 0 && m.Ratio <= 1) || math.IsNaN(m.Ratio) {
			return fmt.Errorf("mirror %d (group %q): ratio must be a share over 0 and at most 1 (100%%)", i, m.Group)
		}
		if m.MaxInFlight < 0 {
			return fmt.Errorf("mirror %d (group %q): max_in_flight must not be negative", i, m.Group)
		}
		if m.Timeout == nil {
			d := caddy.Duration(DefaultMirrorTimeout)
			m.Timeout = &d
		}
		if err := s.target(al, &m.Target); err != nil {
			return fmt.Errorf("mirror %d (group %q): %v", i, m.Group, err)
		}
		if m.run.timeout == 0 {
			return fmt.Errorf("mirror %d (group %q): a mirror needs a timeout", i, m.Group)
		}
		if m.MaxInFlight == 0 {
			m.MaxInFlight = defaultMirrorInFlight
		}
		l := []string{s.gateway, al.name, m.Group, m.Model}
		m.series = &mirrorSeries{
			dropped:    mirrorDropped.WithLabelValues(l...),
			duration:   mirrorDuration.WithLabelValues(l...),
			ttft:       mirrorTTFT.WithLabelValues(l...),
			prompt:     tokensTotal.WithLabelValues(s.gateway, al.name, m.Group, "prompt", "", billingShadow),
			completion: tokensTotal.WithLabelValues(s.gateway, al.name, m.Group, "completion", "", billingShadow),
			cost:       costTotal.WithLabelValues(s.gateway, m.Group, "", billingShadow),
		}
	}
	return nil
}

// sendMirrors sends the copies of a request (r, with id; q is what it
// asks, u how it asks for stream usage) to the alias's mirrors: each
// takes its share. The copy's body is built here, from the body already
// read; the rest runs on its own goroutine.
func (al *Alias) sendMirrors(g *Gateway, r *http.Request, id string, q *asked, u *usageAsk) {
	for _, m := range al.Mirrors {
		if m.Ratio < 1 && rand.Float64() >= m.Ratio {
			continue
		}
		if grp := m.group; m.takenOut(g.clock) != "" || (grp.Breaker != nil && !grp.Shared.Breaker.Closed()) {
			// a group taken out, or failing, gets no copies either (nor
			// does a copy take its breaker's trial)
			m.series.dropped.Inc()
			continue
		}
		if m.inflight.Add(1) > int64(m.MaxInFlight) {
			m.inflight.Add(-1)
			m.series.dropped.Inc()
			continue
		}
		c := &mirrorCopy{m: m, g: g, alias: al, parent: id, id: newRequestID(), stream: q.stream}
		c.length, _ = u.bodyFor(q, &m.Target, &c.body)
		c.req = c.request(r)
		go c.run()
	}
}

// request is the copy's request: the method and path of the client's
// (r), and none of its headers but the content type; the mirror's group
// adds its own credentials and headers. Its context keeps the request's
// values (a trace continues) but not its cancellation.
func (c *mirrorCopy) request(r *http.Request) *http.Request {
	u := *r.URL
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {c.id}}
	if a, ok := r.Header["Accept"]; ok {
		h["Accept"] = a
	}
	req := &http.Request{
		Method: http.MethodPost, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &c.body, ContentLength: c.length, GetBody: c.body.replay,
		Host: r.Host, RemoteAddr: r.RemoteAddr, RequestURI: r.RequestURI,
	}
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		srv = new(caddyhttp.Server)
	}
	c.srv = srv
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), c.m.run.timeout)
	c.cancel = cancel
	return req.WithContext(ctx)
}

// mirrorCopy is one copy of a request on its way to a mirror.
type mirrorCopy struct {
	m      *Mirror
	g      *Gateway
	alias  *Alias
	parent string // the request's id
	id     string
	stream bool
	body   upstreamBody
	length int64
	req    *http.Request
	srv    *caddyhttp.Server
	cancel context.CancelFunc
}

// run sends the copy, reads its answer to the end and meters it.
func (c *mirrorCopy) run() {
	defer c.m.inflight.Add(-1)
	defer c.cancel()
	defer logPanic(c.g.logger, "mirror")
	// a config that stops takes its copies with it
	stop := context.AfterFunc(c.g.life.ctx, c.cancel)
	defer stop()
	m := c.m
	req := caddyhttp.PrepareRequest(c.req, caddy.NewReplacer(), nil, c.srv)
	slot := &upstream.Slot{Group: m.group.VLLM, Model: m.Model, Shadow: true}
	w := &mirrorWriter{header: make(http.Header), slot: slot}
	defer slot.Release() // whatever the proxy panics with
	start := time.Now()
	w.start = start
	aborted, err := proxy(m.group.Run.Serve, w, req)
	dur := time.Since(start)
	w.scan.Finish(nil, aborted)
	if slot.Group != nil && slot.Endpoint == nil && w.status == 0 {
		// no endpoint had room to spare: the copy was never sent
		m.series.dropped.Inc()
		return
	}

	outcome := mirrorOutcome(req.Context(), w, aborted, err)
	s := m.series
	mirrorRequests.WithLabelValues(c.g.Name, c.alias.name, m.Group, m.Model, outcome).Inc()
	s.duration.Observe(dur.Seconds())
	if w.ttfb > 0 {
		s.ttft.Observe(w.ttfb.Seconds())
	}
	u := &w.scan
	usd, priced := c.account(u, dur)
	fields := []zap.Field{
		zap.String("request_id", c.id), zap.String("parent_request_id", c.parent),
		zap.String("billing", billingShadow), zap.String("llm_alias", c.alias.name),
		zap.String("llm_group", m.Group), zap.String("llm_model", m.Model),
		zap.String("llm_outcome", outcome), zap.Int("status", w.status), zap.Duration("duration", dur),
	}
	if w.ttfb > 0 {
		fields = append(fields, zap.Duration("llm_ttfb", w.ttfb))
	}
	if u.Found {
		fields = append(fields, zap.Int64("llm_prompt_tokens", u.Prompt), zap.Int64("llm_completion_tokens", u.Completion))
	}
	if priced {
		fields = append(fields, zap.Float64("llm_cost_usd", usd))
	}
	if err != nil && outcome != "ok" {
		fields = append(fields, zap.String("error", string(because.Classify(err))))
	}
	c.g.in.mirrorLog.Info("mirror request", fields...)
}

// mirrorOutcome is what became of a copy, as its metrics and record say.
func mirrorOutcome(ctx context.Context, w *mirrorWriter, aborted bool, err error) string {
	switch {
	case w.status == 0 || (aborted && w.ttfb == 0):
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "timeout"
		}
		return "unreachable"
	case aborted || (err != nil && w.status < 300):
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "timeout"
		}
		return "interrupted"
	case w.status >= 500:
		return "failed"
	case w.status >= 400:
		return "rejected"
	}
	return "ok"
}

// account counts a copy's tokens and what it cost (a cloud's price, or
// the self-hosted cost per token), in its series and as a shadow charge
// in the books; priced is false when nothing prices it.
func (c *mirrorCopy) account(u *protocol.UsageScanner, dur time.Duration) (usd float64, priced bool) {
	m, s := c.m, c.m.series
	if u.Found {
		s.prompt.Add(float64(u.Prompt))
		s.completion.Add(float64(u.Completion))
	}
	switch cc := m.group.Cost; {
	case cc == nil:
	case m.group.Kind == KindOpenAI:
		usd, priced = cc.RequestCost(u.Prompt, u.Completion, u.Cached, dur), true
		s.cost.Add(usd)
	case c.g.money.Ledger != nil:
		usd, priced = float64(u.Prompt+u.Completion)*c.g.money.SelfCostPerToken(), true
	}
	if c.g.money.Ledger != nil {
		c.g.money.Charge(nil, journal.Charge{Shadow: true, Prompt: u.Prompt, Completion: u.Completion, CloudUSD: usd}, c.g.clock.Now())
	}
	return usd, priced
}

// mirrorWriter takes a mirror's answer: it reads the usage and throws
// the bytes away.
type mirrorWriter struct {
	header http.Header
	status int
	start  time.Time
	ttfb   time.Duration // to the first body byte
	scan   protocol.UsageScanner
	reads  bool // the body is one the scanner reads
	slot   *upstream.Slot
}

func (w *mirrorWriter) HeldSlot() *upstream.Slot { return w.slot }

func (w *mirrorWriter) Header() http.Header { return w.header }

func (w *mirrorWriter) WriteHeader(status int) {
	if w.status != 0 || status < 200 {
		return
	}
	w.status = status
	ct := w.header.Get("Content-Type")
	plain := w.header.Get("Content-Encoding") == ""
	switch {
	case plain && strings.HasPrefix(ct, "text/event-stream"):
		w.scan, w.reads = protocol.UsageScanner{SSE: true}, true
	case plain && strings.HasPrefix(ct, "application/json"):
		w.reads = true
	}
}

func (w *mirrorWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.ttfb == 0 && len(p) > 0 {
		w.ttfb = time.Since(w.start)
	}
	if w.reads {
		return w.scan.Pass(io.Discard, p)
	}
	return len(p), nil
}

// Flush is called by the proxy for streams; nothing is buffered.
func (w *mirrorWriter) Flush() {}

// Billing label values of the token and cost metrics.
const (
	billingBusiness = "business"
	billingShadow   = "shadow"
)
