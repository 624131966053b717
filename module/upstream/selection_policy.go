// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(LeastLoadSelection{})
}

// LeastLoadSelection is a reverse_proxy selection policy for vLLM
// replicas: it picks the endpoint with the lowest load score from each
// replica's own /metrics (waiting queue first, then running relative to
// max_num_seqs, then KV-cache usage), corrected between scrapes by the
// gateway's instant in-flight count. Endpoints that are down (/health),
// do not serve the model (/v1/models), are past their red line
// (max_num_seqs + max_queue requests in flight) or, by default, have
// stale metrics are skipped; when none is left it selects nothing, so the
// proxy answers 503 and a hybrid_llm gateway moves on to the next target.
//
// Inside a hybrid_llm group of kind vllm it is the default and takes its
// settings from the group. In a plain reverse_proxy it is configured
// here, probes the upstreams it sees (plain HTTP), and counts in-flight
// requests with Caddy's per-upstream request count (a best-effort red
// line, since it cannot reserve a slot ahead of the proxy).
type LeastLoadSelection struct {
	// The served model name the upstreams must list in /v1/models, and
	// whose metrics series to read when several models share a server.
	// Default: any.
	Model string `json:"model,omitempty"`

	// vLLM's --max-num-seqs of each upstream: the red line, and the
	// scale of the running share. Default: no red line.
	MaxNumSeqs int `json:"max_num_seqs,omitempty"`

	// Requests allowed to wait in each upstream's queue beyond
	// max_num_seqs before the red line is reached. Default: 0.
	MaxQueue int `json:"max_queue,omitempty"`

	// How the upstreams are probed.
	Probe *ProbeConfig `json:"probe,omitempty"`

	// Prefix-cache affinity: a conversation's requests go to the upstream
	// that holds its start, within a load bound (see AffinityConfig). The
	// policy reads a request body of known length up to 4 MiB for its
	// key. Default: off, by load alone.
	Affinity *AffinityConfig `json:"affinity,omitempty"`

	mu       *sync.Mutex // guards group.Endpoints, seen and swept
	group    *VLLMGroup
	seen     map[string]time.Time // when each address was last in a pool
	swept    time.Time
	settings probe.Settings
	logger   *zap.Logger
	clock    clock.Clock // of its probers and standalone group
}

// forgetUpstreamAfter is how long the standalone policy keeps probing an
// address that no pool it was asked to choose from held (a pod that
// dynamic upstreams no longer return).
const forgetUpstreamAfter = 5 * time.Minute

// CaddyModule returns the Caddy module information.
func (LeastLoadSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.vllm_least_load",
		New: func() caddy.Module { return new(LeastLoadSelection) },
	}
}

// Provision sets up the policy for use in a plain reverse_proxy.
func (s *LeastLoadSelection) Provision(ctx caddy.Context) error {
	s.logger = ctx.Logger()
	s.clock = clock.Process
	s.mu = new(sync.Mutex)
	if s.MaxNumSeqs < 0 || s.MaxQueue < 0 {
		return fmt.Errorf("max_num_seqs and max_queue must not be negative")
	}
	settings, staleAfter, unknownOK, err := s.Probe.Provision()
	if err != nil {
		return err
	}
	if s.Model != "" {
		settings.Expect = []string{s.Model}
	}
	maxLoad, err := s.Affinity.resolve()
	if err != nil {
		return err
	}
	s.settings = settings
	s.group = &VLLMGroup{
		Settings: Settings{maxNumSeqs: s.MaxNumSeqs, maxQueue: s.MaxQueue, StaleAfter: staleAfter, unknownOK: unknownOK,
			maxLoad: maxLoad, session: s.Affinity},
		Endpoints: make(map[string]*Endpoint),
		clock:     s.clock,
	}
	s.seen = make(map[string]time.Time)
	s.swept = s.clock.Now()
	return nil
}

// Cleanup releases the probers the policy started.
func (s *LeastLoadSelection) Cleanup() error {
	if s.group == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ep := range s.group.Endpoints {
		if ep != nil { // nil: an address that is not probed
			probe.Release(ep.Prober, s)
		}
	}
	s.group.Endpoints = nil
	return nil
}

// Select implements reverseproxy.Selector.
func (s *LeastLoadSelection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	if slot := SlotOf(w); slot != nil && slot.Group != nil {
		// a retry inside the group (lb_retries): the previous pick failed;
		// give back its slot and settle its breaker, trial included
		slot.Release()
		slot.pickFailed(s.logger)
		if len(slot.Group.Endpoints) > 0 || slot.Group.Added.Load() != nil {
			return slot.Group.selectEndpoint(pool, slot)
		}
		// a group without probed upstreams (dynamic): fall through
	}
	return s.selectStandalone(pool, r)
}

// selectStandalone serves a plain reverse_proxy: the policy's own probers,
// Caddy's request count as the in-flight signal; with affinity, the
// request's conversation's upstream within the load bound.
func (s *LeastLoadSelection) selectStandalone(pool reverseproxy.UpstreamPool, r *http.Request) *reverseproxy.Upstream {
	if s.group == nil {
		return nil
	}
	t := s.clock.Now()
	var key uint64
	var aff ranked
	if s.Affinity != nil && r != nil && len(pool) > 1 {
		key = conversationKey(r, s.Affinity)
	}
	var best *reverseproxy.Upstream
	bestScore := math.Inf(1)
	for _, u := range pool {
		ep := s.endpoint(u.Dial, t)
		if !u.Available() {
			continue
		}
		if ep == nil {
			if best == nil || float64(u.NumRequests()) < bestScore {
				best, bestScore = u, float64(u.NumRequests())
			}
			continue
		}
		v := s.group.view(ep, s.Model, t)
		v.inflight = int64(u.NumRequests())
		v.atScrape = v.inflight // Caddy's count is not sampled at scrapes
		if s.Model == "" {
			v.modelsKnown = false
		}
		sc, why := v.score()
		if why != "" {
			continue
		}
		if key != 0 {
			aff.add(key, u.Dial, candidate{u: u, ep: ep, score: sc, kv: v.kvPart}, 1/float64(cmp.Or(s.MaxNumSeqs, defaultAssumedSeqs)))
		}
		if sc < bestScore {
			best, bestScore = u, sc
		}
	}
	s.sweep(t)
	if c, ok := aff.pick(s.group.Settings.maxLoad); ok {
		return c.u
	}
	return best
}

// sweep releases, at most every half forgetUpstreamAfter, the probers of
// addresses no pool has held for forgetUpstreamAfter: dynamic upstreams
// (SRV, A lookups) come and go.
func (s *LeastLoadSelection) sweep(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group.Endpoints == nil || t.Sub(s.swept) < forgetUpstreamAfter/2 {
		return // cleaned up, or swept recently
	}
	s.swept = t
	for dial, seen := range s.seen {
		if t.Sub(seen) < forgetUpstreamAfter {
			continue
		}
		if ep := s.group.Endpoints[dial]; ep != nil {
			probe.Release(ep.Prober, s)
		}
		delete(s.group.Endpoints, dial)
		delete(s.seen, dial)
	}
}

// endpoint returns the policy's prober for a dial address, starting one
// on first sight, and notes that a pool held the address at time t.
func (s *LeastLoadSelection) endpoint(dial string, t time.Time) *Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group.Endpoints == nil {
		return nil // cleaned up
	}
	s.seen[dial] = t
	if ep, ok := s.group.Endpoints[dial]; ok {
		return ep
	}
	var ep *Endpoint
	if probeable(dial) {
		if p, err := probe.Acquire("http://"+dial, s, s.settings, s.clock, s.logger); err == nil {
			p.Begin()
			ep = &Endpoint{Dial: dial, Prober: p}
		}
	}
	s.group.Endpoints[dial] = ep
	return ep
}

// probeable reports whether a dial address is a plain host:port.
func probeable(dial string) bool {
	return dial != "" && !strings.ContainsAny(dial, "/{}")
}

// UnmarshalCaddyfile sets up the policy from Caddyfile tokens. Syntax:
//
//	lb_policy vllm_least_load [<max_num_seqs>] {
//		model        <served model name>
//		max_num_seqs <n>
//		max_queue    <n>
//		probe { ... }
//		affinity { ... }    # as a hybrid_llm vllm group's
//	}
func (s *LeastLoadSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume policy name
	if d.NextArg() {
		n, err := strconv.Atoi(d.Val())
		if err != nil || n <= 0 {
			return d.Errf("invalid max_num_seqs '%s'", d.Val())
		}
		s.MaxNumSeqs = n
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "model":
			if !d.NextArg() {
				return d.ArgErr()
			}
			s.Model = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		case "max_num_seqs":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			s.MaxNumSeqs = n
		case "max_queue":
			n, err := caddyargs.NonNegativeInt(d)
			if err != nil {
				return err
			}
			s.MaxQueue = n
		case "probe":
			if s.Probe != nil {
				return d.Err("probe already specified")
			}
			pc, err := probe.UnmarshalCaddyfile(d)
			if err != nil {
				return err
			}
			s.Probe = pc
		case "affinity":
			if s.Affinity != nil {
				return d.Err("affinity already specified")
			}
			a, err := UnmarshalAffinity(d)
			if err != nil {
				return err
			}
			s.Affinity = a
		default:
			return caddyargs.UnknownOption(d, "vllm_least_load option", d.Val(), "affinity", "max_num_seqs", "max_queue", "model", "probe")
		}
	}
	return nil
}

// Interface guards
var (
	_ reverseproxy.Selector = (*LeastLoadSelection)(nil)
	_ caddy.Provisioner     = (*LeastLoadSelection)(nil)
	_ caddy.CleanerUpper    = (*LeastLoadSelection)(nil)
	_ caddyfile.Unmarshaler = (*LeastLoadSelection)(nil)
)
