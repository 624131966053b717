// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// gateways holds the live gateway of each name. A reload provisions the
// new config before it cleans up the old one, so an entry outlives the
// swap and always points at the newest instance.
var gateways = caddy.NewUsagePool()

// gatewayEntry is the registry slot of one gateway name.
type gatewayEntry struct {
	current atomic.Pointer[Gateway]
}

func (*gatewayEntry) Destruct() error { return nil }

// register makes g the current gateway of its name. Two gateways of one
// config may not share a name.
func (g *Gateway) register(cfg any) error {
	val, _ := gateways.LoadOrStore(g.Name, new(gatewayEntry))
	entry := val.(*gatewayEntry)
	if prev := entry.current.Load(); prev != nil && prev.cfg == cfg {
		_, _ = gateways.Delete(g.Name)
		return fmt.Errorf("two hybrid_llm handlers named %q in one config: give each its own name", g.Name)
	}
	g.entry, g.cfg = entry, cfg
	entry.current.Store(g)
	return nil
}

// unregister drops g, unless a newer instance took its place.
func (g *Gateway) unregister() {
	if g.entry == nil {
		return
	}
	g.entry.current.CompareAndSwap(g, nil)
	_, _ = gateways.Delete(g.Name)
	g.entry = nil
}

// groupStates holds what a group keeps across reloads: its overflow
// state and breakers, by gateway and group name.
var groupStates = caddy.NewUsagePool()

// groupShared is a group's state that outlives config reloads: what
// operators set through the admin API (drains) and what the gateway
// learned (overflow, breakers).
type groupShared struct {
	drained   atomic.Bool
	overflow  overflowState
	breaker   breaker
	mu        sync.Mutex
	endpoints map[string]*endpointShared // by endpoint address
}

// endpointShared is an endpoint's state that outlives config reloads.
type endpointShared struct {
	drained atomic.Bool
	breaker breaker
}

func (*groupShared) Destruct() error { return nil }

func (grp *Group) acquireShared(key string) {
	val, _ := groupStates.LoadOrStore(key, &groupShared{endpoints: make(map[string]*endpointShared)})
	grp.shared, grp.sharedKey = val.(*groupShared), key
}

// endpoint returns the shared state of one endpoint of the group.
func (gs *groupShared) endpoint(dial string) *endpointShared {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	es := gs.endpoints[dial]
	if es == nil {
		es = new(endpointShared)
		gs.endpoints[dial] = es
	}
	return es
}

// liveGateways returns the current gateways, by name.
func liveGateways() []*Gateway {
	var out []*Gateway
	gateways.Range(func(_, val any) bool {
		if g := val.(*gatewayEntry).current.Load(); g != nil {
			out = append(out, g)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *Gateway) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// The state document served at GET /hybrid_llm/state. Field names are a
// stable, documented schema (README: "Admin API").

// StateDoc is the whole state.
type StateDoc struct {
	Gateways []GatewayState `json:"gateways"`
}

// GatewayState is one gateway.
type GatewayState struct {
	Name    string       `json:"name"`
	Aliases []AliasState `json:"aliases"`
	Groups  []GroupState `json:"groups"`
}

// AliasState is one alias and its targets in order.
type AliasState struct {
	Name    string        `json:"name"`
	Targets []TargetState `json:"targets"`
}

// TargetState is one target of an alias.
type TargetState struct {
	Group          string  `json:"group"`
	Model          string  `json:"model"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// GroupState is one group.
type GroupState struct {
	Name       string           `json:"name"`
	Kind       string           `json:"kind"`
	MaxNumSeqs int              `json:"max_num_seqs,omitempty"`
	MaxQueue   int              `json:"max_queue,omitempty"`
	Models     []string         `json:"models"`
	Endpoints  []EndpointState  `json:"endpoints,omitempty"`
	ModelCheck *ModelCheckState `json:"model_check,omitempty"`
	Overflow   *OverflowState   `json:"overflow,omitempty"`
	Drained    bool             `json:"drained"`
	Breaker    *BreakerState    `json:"breaker,omitempty"`
}

// OverflowState is a group's overflow controller and its signals now.
type OverflowState struct {
	Active bool       `json:"active"`
	Since  *time.Time `json:"since"`
	// the last transition's cause, e.g. "waiting=12 > 8"
	Reason      string   `json:"reason"`
	Transitions int64    `json:"transitions"`
	Waiting     *float64 `json:"waiting"`
	TTFTP99     *float64 `json:"ttft_p99_seconds"`
	KVUsage     *float64 `json:"kv_cache_usage"`
	InFlight    float64  `json:"in_flight"`
}

// BreakerState is a breaker: "closed", "open" or "half_open".
type BreakerState struct {
	State     string     `json:"state"`
	OpenUntil *time.Time `json:"open_until,omitempty"`
	Opened    int64      `json:"opened"`
}

func breakerState(b *breaker) *BreakerState {
	st, until := b.view()
	bs := &BreakerState{State: st, Opened: b.opened.Load()}
	if !until.IsZero() {
		bs.OpenUntil = &until
	}
	return bs
}

func optional(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// EndpointState is one endpoint of a vLLM group, as its prober sees it.
type EndpointState struct {
	Address string `json:"address"`
	// "up", "down" or "unknown" (not probed yet)
	Health      string `json:"health"`
	HealthError string `json:"health_error,omitempty"`
	// expected model names this endpoint does not serve: non-empty means
	// misconfigured (excluded from routing for those names)
	Misconfigured []string `json:"misconfigured"`
	// served model names with their max_model_len; null before the
	// first successful /v1/models
	ServedModels map[string]int `json:"served_models"`
	ModelsError  string         `json:"models_error,omitempty"`
	Drained      bool           `json:"drained"`
	InFlight     int64          `json:"in_flight"`
	RedLine      int64          `json:"red_line,omitempty"`
	Breaker      *BreakerState  `json:"breaker,omitempty"`
	Weight       float64        `json:"weight"`
	Metrics      MetricsState   `json:"metrics"`
}

// MetricsState is the last /metrics scrape of an endpoint.
type MetricsState struct {
	Fresh          bool     `json:"fresh"`
	AgeSeconds     *float64 `json:"age_seconds"`
	Waiting        float64  `json:"waiting"`
	Running        float64  `json:"running"`
	KVCacheUsage   *float64 `json:"kv_cache_usage"`
	TTFTP50Seconds *float64 `json:"ttft_p50_seconds"`
	TTFTP99Seconds *float64 `json:"ttft_p99_seconds"`
	Error          string   `json:"error,omitempty"`
}

// ModelCheckState is the last model name check of an openai group.
type ModelCheckState struct {
	CheckedAt *time.Time `json:"checked_at"`
	Missing   []string   `json:"missing"`
	Error     string     `json:"error,omitempty"`
}

// state renders the current state of all live gateways.
func state() StateDoc {
	doc := StateDoc{Gateways: []GatewayState{}}
	t := now()
	for _, g := range liveGateways() {
		gs := GatewayState{Name: g.Name, Aliases: []AliasState{}, Groups: []GroupState{}}
		for _, name := range sortedKeys(g.aliases) {
			as := AliasState{Name: name}
			for _, tg := range g.aliases[name].Targets {
				as.Targets = append(as.Targets, TargetState{Group: tg.Group, Model: tg.Model,
					TimeoutSeconds: time.Duration(tg.Timeout).Seconds()})
			}
			gs.Aliases = append(gs.Aliases, as)
		}
		for _, name := range sortedKeys(g.Groups) {
			gs.Groups = append(gs.Groups, g.Groups[name].state(t))
		}
		doc.Gateways = append(doc.Gateways, gs)
	}
	return doc
}

func (grp *Group) state(t time.Time) GroupState {
	gs := GroupState{Name: grp.name, Kind: grp.Kind, MaxNumSeqs: grp.MaxNumSeqs, MaxQueue: grp.MaxQueue,
		Models: slices.Clone(grp.expect), Drained: grp.shared != nil && grp.shared.drained.Load()}
	if gs.Models == nil {
		gs.Models = []string{}
	}
	if vg := grp.vllm; vg != nil {
		for _, dial := range sortedKeys(vg.endpoints) {
			gs.Endpoints = append(gs.Endpoints, vg.endpointState(vg.endpoints[dial], grp.expect, t))
		}
	}
	if oc := grp.Overflow; oc != nil && grp.vllm != nil && grp.shared != nil {
		st := &grp.shared.overflow
		sig := grp.vllm.signals(t)
		st.mu.Lock()
		os := &OverflowState{Active: st.active.Load(), Reason: st.reason, Transitions: st.changes.Load(),
			Waiting: optional(sig.waiting), TTFTP99: optional(sig.ttftP99), KVUsage: optional(sig.kv), InFlight: sig.inflight}
		if !st.since.IsZero() {
			since := st.since
			os.Since = &since
		}
		st.mu.Unlock()
		gs.Overflow = os
	}
	if grp.Breaker != nil && grp.shared != nil {
		gs.Breaker = breakerState(&grp.shared.breaker)
	}
	if grp.Kind == KindOpenAI && !grp.DisableModelCheck && len(grp.expect) > 0 {
		at, missing, errText := grp.check.result()
		mc := &ModelCheckState{Missing: missing, Error: errText}
		if mc.Missing == nil {
			mc.Missing = []string{}
		}
		if !at.IsZero() {
			mc.CheckedAt = &at
		}
		gs.ModelCheck = mc
	}
	return gs
}

func (vg *vllmGroup) endpointState(ep *endpoint, expect []string, t time.Time) EndpointState {
	snap := ep.p.snap.Load()
	es := EndpointState{
		Address:       ep.dial,
		Health:        [...]string{"unknown", "up", "down"}[snap.health],
		HealthError:   snap.healthErr,
		Misconfigured: []string{},
		ServedModels:  snap.models,
		ModelsError:   snap.modelsErr,
		InFlight:      ep.p.inflight.Load(),
		RedLine:       vg.redLine(ep),
		Weight:        ep.weight,
	}
	if vg.breakers && ep.br != nil {
		es.Breaker = breakerState(ep.br)
	}
	es.Drained = ep.drained != nil && ep.drained.Load()
	if snap.models != nil {
		for _, m := range expect {
			if _, ok := snap.models[m]; !ok {
				es.Misconfigured = append(es.Misconfigured, m)
			}
		}
	}
	ms := MetricsState{Error: snap.metricsErr}
	if !snap.metricsAt.IsZero() {
		age := t.Sub(snap.metricsAt).Seconds()
		ms.AgeSeconds = &age
		ms.Fresh = t.Sub(snap.metricsAt) <= vg.staleAfter
		var waiting, running, kv float64
		kvSeen := false
		for _, l := range snap.loads {
			waiting += l.Waiting
			running += l.Running
			if !math.IsNaN(l.KVUsage) {
				kv = max(kv, l.KVUsage)
				kvSeen = true
			}
		}
		ms.Waiting, ms.Running = waiting, running
		if kvSeen {
			ms.KVCacheUsage = &kv
		}
	}
	if !math.IsNaN(snap.ttftP50) {
		p50, p99 := snap.ttftP50, snap.ttftP99
		ms.TTFTP50Seconds, ms.TTFTP99Seconds = &p50, &p99
	}
	es.Metrics = ms
	return es
}

// logPanic, deferred at the top of a background goroutine, keeps a panic
// there from taking Caddy down and logs it with its stack.
func logPanic(logger *zap.Logger, what string) {
	if err := recover(); err != nil {
		logger.Error(what+" panicked", zap.Any("error", err), zap.ByteString("stack", debug.Stack()))
	}
}
