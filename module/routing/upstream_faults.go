// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// Upstream answers that are the gateway's configuration at fault (a
// rejected key, a model name or path the upstream does not know) fall
// back like any failure. They are logged at error level once when they
// start, per target, endpoint and reason, and at info level once when
// the upstream answers again; a vLLM endpoint that says it does not know
// the model is marked misconfigured at once.

// isConfigFault reports whether an attempt failed for the gateway's
// configuration rather than the upstream's health: a rejected key, a
// model name it does not know, a page that is not the API, or the route
// of an API the group says it serves answered 404 (a vLLM older than the
// Messages API).
func isConfigFault(a *Attempt) bool {
	switch a.Reason {
	case because.UpstreamAuth, because.ModelNotFound, because.NotAPI:
		return true
	case because.ProtocolUnsupported:
		return a.Status == http.StatusNotFound
	}
	return false
}

// faultLog remembers the configuration faults of a target that were
// logged, so that each is logged once, not on every request.
type faultLog struct {
	n  atomic.Int32 // faults held; a success reads only this
	mu sync.Mutex
	on map[faultKey]struct{}
}

// faultKey is one fault: an endpoint (empty for a group without probed
// endpoints) and the reason.
type faultKey struct {
	endpoint string
	why      Reason
}

// start records a fault and reports whether it is new.
func (f *faultLog) start(k faultKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.on[k]; ok {
		return false
	}
	if f.on == nil {
		f.on = make(map[faultKey]struct{})
	}
	f.on[k] = struct{}{}
	if k.why != because.ProtocolUnsupported { // never ended (see end)
		f.n.Add(1)
	}
	return true
}

// end forgets the faults of an endpoint that answered, and returns them.
func (f *faultLog) end(endpoint string) []Reason {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ended []Reason
	for k := range f.on {
		// an API the endpoint does not serve stays so, whatever else it
		// answers: logged once
		if k.endpoint == endpoint && k.why != because.ProtocolUnsupported {
			delete(f.on, k)
			f.n.Add(-1)
			ended = append(ended, k.why)
		}
	}
	slices.Sort(ended)
	return ended
}

// configFault handles an attempt that failed for the gateway's
// configuration (a): a vLLM endpoint that does not know the model is marked
// misconfigured for it, a cloud's model list is checked again, and a new
// fault is logged.
func (f faultObserver) configFault(rec *AttemptRecord, a *Attempt) {
	t, ep := rec.Target, rec.Result.Endpoint
	dial := upstreamOf(rec.Request.HTTP, ep)
	if a.Reason == because.ModelNotFound {
		if ep != nil {
			ep.Prober.MarkMissing(t.Model)
		} else {
			t.Upstream.Check.WakeNow()
		}
	}
	if !t.Seen.faults.start(faultKey{endpoint: dial, why: a.Reason}) {
		return
	}
	var msg string
	switch a.Reason {
	case because.UpstreamAuth:
		msg = "the upstream refused the gateway's credentials: check the group's api_key; requests fall back to the next target"
	case because.NotAPI:
		msg = "the upstream answered with an HTML page, not the API: check the group's upstream address (scheme, host, port); requests fall back to the next target"
	case because.ProtocolUnsupported:
		msg = "the upstream answered 404 for the route of an API its group serves (a vLLM older than 0.11 has no /v1/messages): leave the API out of the group's apis (a Messages request is then translated into chat completions); its requests go to the next target"
	case because.ModelNotFound:
		msg = "the upstream does not know the target's model name: requests fall back to the next target"
		if ep != nil {
			msg = "the vLLM endpoint does not serve the target's model name: it is marked misconfigured until its /v1/models lists the name; requests fall back to the next target"
		}
	default:
		msg = "the upstream answered 404 to the gateway: check the group's path and the target's model name; requests fall back to the next target"
	}
	fields := []zap.Field{zap.String("alias", rec.Request.Alias), zap.String("group", t.Group), zap.String("model", t.Model),
		zap.String("reason", string(a.Reason)), zap.Int("status", a.Status)}
	if dial != "" {
		fields = append(fields, zap.String("endpoint", dial))
	}
	f.logger.Error(msg, fields...)
}

// upstreamOf names the endpoint an attempt of request r went to: the
// vLLM endpoint, else the upstream the group's proxy picked last (a cloud
// region), so that faults are kept per upstream whatever the group's
// kind.
func upstreamOf(r *http.Request, ep *upstream.Endpoint) string {
	if ep != nil {
		return ep.Dial
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		if hp, ok := repl.GetString("http.reverse_proxy.upstream.hostport"); ok {
			return hp
		}
	}
	return ""
}

// faultObserver handles the attempts that fail for the gateway's
// configuration (see configFault), and logs once that a target with
// such faults answers again.
type faultObserver struct{ logger *zap.Logger }

func (faultObserver) AttemptBegan(ctx context.Context, _ *AttemptRecord) context.Context { return ctx }

func (f faultObserver) AttemptEnded(a *AttemptRecord) {
	if a.Failed != nil && isConfigFault(a.Failed) {
		f.configFault(a, a.Failed)
		return
	}
	t := a.Target
	if a.Result.Verdict != VerdictSuccess || t.Seen.faults.n.Load() == 0 {
		return
	}
	dial := upstreamOf(a.Request.HTTP, a.Result.Endpoint)
	ended := t.Seen.faults.end(dial)
	if len(ended) == 0 {
		return
	}
	reasons := make([]string, len(ended))
	for i, why := range ended {
		reasons[i] = string(why)
	}
	fields := []zap.Field{zap.String("alias", a.Request.Alias), zap.String("group", t.Group), zap.String("model", t.Model),
		zap.Strings("reasons", reasons)}
	if dial != "" {
		fields = append(fields, zap.String("endpoint", dial))
	}
	f.logger.Info("the upstream answers the target again", fields...)
}
