// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package core

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/journal"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// sendMirrors sends the copies of a request (r, with id; q is what it
// asks, u how it asks for stream usage) to the alias's mirrors: each
// takes its share; a sheddable client's request is copied to no cloud.
// The copy's body is built here, from the body already read; the rest
// runs on its own goroutine.
func sendMirrors(al *routing.Alias, f *Front, r *http.Request, id string, q *routing.Asked, u *usageAsk, sheddable bool) {
	if q.API.Free {
		return // a token count is no traffic to validate
	}
	for _, m := range al.Mirrors {
		if !m.Upstream.Serves(q.API.Endpoint) {
			continue // never sent a body it cannot read
		}
		if sheddable && m.Upstream.Cloud() {
			continue // its client's requests go to no cloud
		}
		if m.Ratio < 1 && rand.Float64() >= m.Ratio {
			continue
		}
		if grp := m.Upstream; m.TakenOut(f.Clock) != "" || (grp.Breaker != nil && !grp.Shared.Breaker.Closed()) {
			// a group taken out, or failing, gets no copies either (nor
			// does a copy take its breaker's trial)
			m.Series.Dropped.Inc()
			continue
		}
		if m.Inflight.Add(1) > int64(m.MaxInFlight) {
			m.Inflight.Add(-1)
			m.Series.Dropped.Inc()
			continue
		}
		c := &mirrorCopy{m: m, f: f, alias: al, parent: id, id: newRequestID(), stream: q.Stream, events: q.API.Events}
		c.length, _ = u.bodyFor(q, &m.Target, priority.Batch, &c.body) // a copy is the least urgent
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
	for k, v := range r.Header {
		// Accept, and the Anthropic API's version and betas, which its
		// upstreams require with the body fields they name
		if k == "Accept" || strings.HasPrefix(k, "Anthropic-") {
			h[k] = v
		}
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), c.m.Run.Timeout)
	c.cancel = cancel
	return req.WithContext(ctx)
}

// mirrorCopy is one copy of a request on its way to a mirror.
type mirrorCopy struct {
	m      *routing.Mirror
	f      *Front
	alias  *routing.Alias
	parent string // the request's id
	id     string
	stream bool
	events protocol.Events // the request's API's
	body   upstreamBody
	length int64
	req    *http.Request
	srv    *caddyhttp.Server
	cancel context.CancelFunc
}

// run sends the copy, reads its answer to the end and meters it.
func (c *mirrorCopy) run() {
	defer c.m.Inflight.Add(-1)
	defer c.cancel()
	defer logPanic(c.f.Logger, "mirror")
	// a config that stops takes its copies with it
	stop := context.AfterFunc(c.f.Life, c.cancel)
	defer stop()
	m := c.m
	req := caddyhttp.PrepareRequest(c.req, caddy.NewReplacer(), nil, c.srv)
	slot := &upstream.Slot{Group: m.Upstream.VLLM, Model: m.Model, Shadow: true, Class: priority.Batch}
	w := &mirrorWriter{header: make(http.Header), slot: slot, scan: protocol.UsageScanner{Events: c.events}}
	defer slot.Release() // whatever the proxy panics with
	start := time.Now()
	w.start = start
	aborted, err := Proxy(m.Upstream.Run.Serve, w, req)
	dur := time.Since(start)
	w.scan.Finish(nil, aborted)
	if slot.Group != nil && slot.Endpoint == nil && w.status == 0 {
		// no endpoint had room to spare: the copy was never sent
		m.Series.Dropped.Inc()
		return
	}

	outcome := mirrorOutcome(req.Context(), w, aborted, err)
	s := m.Series
	routing.MirrorRequests.WithLabelValues(c.f.Name, c.alias.Name, m.Group, m.Model, outcome).Inc()
	s.Duration.Observe(dur.Seconds())
	if w.ttfb > 0 {
		s.TTFT.Observe(w.ttfb.Seconds())
	}
	u := &w.scan
	usd, priced := c.account(u, dur)
	fields := []zap.Field{
		zap.String("request_id", c.id), zap.String("parent_request_id", c.parent),
		zap.String("billing", routing.BillingShadow), zap.String("llm_alias", c.alias.Name),
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
	c.f.MirrorLog.Info("mirror request", fields...)
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
	m, s := c.m, c.m.Series
	if u.Found {
		s.Prompt.Add(float64(u.Prompt))
		s.Completion.Add(float64(u.Completion))
	}
	switch cc := m.Upstream.Cost; {
	case cc == nil:
	case m.Upstream.Cloud():
		usd, priced = cc.RequestCost(tokensOf(&u.Usage), dur), true
		s.Cost.Add(usd)
	case c.f.Money.Ledger != nil:
		usd, priced = float64(u.Prompt+u.Completion)*c.f.Money.SelfCostPerToken(), true
	}
	if c.f.Money.Ledger != nil {
		c.f.Money.Charge(nil, journal.Charge{Shadow: true, Prompt: u.Prompt, Completion: u.Completion, CloudUSD: usd}, c.f.Clock.Now())
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
		w.scan, w.reads = protocol.UsageScanner{SSE: true, Events: w.scan.Events}, true
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
