// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"math"
	"slices"
	"time"
)

// The state document served at GET /hybrid_llm/state. Field names are a
// stable, documented schema (README: "Admin API").

// StateDoc is the whole state.
type StateDoc struct {
	// the Caddy process that answered, so that a person can tell which
	// one a default admin address reached
	Process  *ProcessState  `json:"process,omitempty"`
	Gateways []GatewayState `json:"gateways"`
}

// ProcessState names the Caddy process that answered.
type ProcessState struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
	// Caddy's version
	Version string `json:"version"`
}

// GatewayState is one gateway.
type GatewayState struct {
	Name    string       `json:"name"`
	Aliases []AliasState `json:"aliases"`
	Groups  []GroupState `json:"groups"`
	// with a registry: what the gateway last applied of it
	Registry *RegistryState `json:"registry,omitempty"`
}

// RegistryState is the shared registry as the gateway sees it.
type RegistryState struct {
	Prefix   string `json:"prefix"`
	Revision int64  `json:"revision"`
	// this process's member key, and the live members (this one
	// included) each endpoint's red line is split among
	Member  string `json:"member"`
	Members int    `json:"members"`
	// full reads of the prefix so far (the first, then one after each
	// compaction or change of etcd's history)
	Resyncs int64 `json:"resyncs"`
	// when etcd last answered, and how long ago: how stale the snapshot
	// applied may be; null before it ever answered
	LastContact  *time.Time `json:"last_contact"`
	StaleSeconds *float64   `json:"stale_seconds"`
}

// AliasState is one alias and its targets in order.
type AliasState struct {
	Name    string        `json:"name"`
	Targets []TargetState `json:"targets"`
	// with tiers: the degradation chain's share, cap and triggers
	Degrade *DegradeState `json:"degrade,omitempty"`
}

// DegradeState is an alias's degradation chain now.
type DegradeState struct {
	// degraded answers among the answered requests of the window
	Share      float64 `json:"share"`
	Answered   int     `json:"answered"`
	Degraded   int     `json:"degraded"`
	Cap        float64 `json:"cap"`
	CapReached bool    `json:"cap_reached"`
	// the upper targets' triggers
	Triggers []DegradeTriggerState `json:"triggers"`
}

// DegradeTriggerState is one upper target's trigger.
type DegradeTriggerState struct {
	Group    string             `json:"group"`
	Model    string             `json:"model"`
	Active   bool               `json:"active"`
	Reason   string             `json:"reason,omitempty"`
	Since    string             `json:"since,omitempty"`
	Why      string             `json:"why,omitempty"`
	Metadata map[string]float64 `json:"metadata,omitempty"`
}

// TargetState is one target of an alias.
type TargetState struct {
	Group string `json:"group"`
	Model string `json:"model"`
	// the attempt limits in effect; absent when there is none
	TimeoutSeconds          float64 `json:"timeout_seconds,omitempty"`
	FirstByteTimeoutSeconds float64 `json:"first_byte_timeout_seconds,omitempty"`
	IdleTimeoutSeconds      float64 `json:"idle_timeout_seconds,omitempty"`
	// further attempts on the target after a failure, default included
	Retries int `json:"retries"`
	// in a weighted set: its name, the member's weight now and in the
	// config
	Set              string `json:"set,omitempty"`
	Weight           *int   `json:"weight,omitempty"`
	ConfiguredWeight *int   `json:"configured_weight,omitempty"`
	// the set's strategy, when it has one other than weighted
	Strategy string `json:"strategy,omitempty"`
	// a degraded tier: its quality, max_tokens and formats
	Tier *TierConfig `json:"tier,omitempty"`
	// health-score scheduling, when the set's members are watched
	Health *TargetHealthState `json:"health,omitempty"`
}

// TargetHealthState is a weighted set member's health, as its set's
// scheduler sees it.
type TargetHealthState struct {
	// ok, alert, recovering (in service at part of its weight), degraded
	// or broken (out)
	Level string `json:"level"`
	Since string `json:"since"`
	// over a threshold but kept in service: the last member in service,
	// or the most the set may take out at once
	Sick bool `json:"sick,omitempty"`
	// every member is sick: traffic goes to all by weight
	Panic bool `json:"panic,omitempty"`
	// the window's numbers at the last evaluation
	ErrorRate float64 `json:"error_rate"`
	P99Ms     int64   `json:"p99_ms"`
	Requests  int     `json:"requests"`
	Inflight  int64   `json:"inflight"`
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
	// until when the group (kind openai) gets no request, as its 429
	// with Retry-After asked; absent when it is not held
	RateLimitedUntil *time.Time `json:"rate_limited_until,omitempty"`
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

// BreakerState is a breaker at the time of the document: "closed",
// "open" (until open_until) or "half_open" (its cooldown is over: the
// next request is its trial, and trial says one is in flight).
type BreakerState struct {
	State     string     `json:"state"`
	OpenUntil *time.Time `json:"open_until,omitempty"`
	Trial     bool       `json:"trial,omitempty"`
	Opened    int64      `json:"opened"`
}

func breakerState(b *breaker, t time.Time) *BreakerState {
	st, until, trial := b.view(t)
	bs := &BreakerState{State: st, Trial: trial, Opened: b.opened.Load()}
	if !until.IsZero() {
		bs.OpenUntil = &until
	}
	return bs
}

// heldUntil is the end of a 429's hold, if it is after t.
func heldUntil(b *breaker, t time.Time) *time.Time {
	if u := b.holdUntil.Load(); u > t.UnixNano() {
		until := time.Unix(0, u)
		return &until
	}
	return nil
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
	// the most requests this gateway keeps in flight to the endpoint
	// (with a registry, its share among the live gateways; -1 when the
	// share is none); absent without a limit
	RedLine int64         `json:"red_line,omitempty"`
	Breaker *BreakerState `json:"breaker,omitempty"`
	// until when the endpoint gets no request, as its 429 with
	// Retry-After asked; absent when it is not held
	RateLimitedUntil *time.Time `json:"rate_limited_until,omitempty"`
	Weight           float64    `json:"weight"`
	// listed by the registry, not the config
	Added   bool         `json:"added,omitempty"`
	Metrics MetricsState `json:"metrics"`
	// with the group's health: the endpoint's health-score level and
	// window, and the share of a whole endpoint it serves at, in percent
	HealthScore  *TargetHealthState `json:"health_score,omitempty"`
	ServePercent *int               `json:"serve_percent,omitempty"`
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
func state() StateDoc { return stateOf(liveGateways()) }

// stateOf describes the given gateways.
func stateOf(gws []*Gateway) StateDoc {
	doc := StateDoc{Gateways: []GatewayState{}}
	t := provisionClock.Now()
	for _, g := range gws {
		gs := GatewayState{Name: g.Name, Aliases: []AliasState{}, Groups: []GroupState{}, Registry: g.registryState()}
		for _, name := range sortedKeys(g.aliases) {
			as := AliasState{Name: name}
			al := g.aliases[name]
			for i, tg := range al.Targets {
				ts := TargetState{Group: tg.Group, Model: tg.Model,
					TimeoutSeconds: tg.timeout.Seconds(), FirstByteTimeoutSeconds: tg.firstByte.Seconds(),
					IdleTimeoutSeconds: tg.idle.Seconds(), Retries: tg.retries}
				if ws := al.setAt(i); ws != nil {
					// the weight served now, in the config's units
					fine := ws.rr.weight(i - ws.start)
					cur, conf := int(math.Round(float64(fine)/100)), ws.configured[i-ws.start]
					if fine > 0 {
						cur = max(cur, 1) // it takes requests
					}
					ts.Set, ts.Weight, ts.ConfiguredWeight, ts.Strategy = ws.name, &cur, &conf, ws.strategy
					if tg.health != nil {
						var w int
						ts.Health, w = tg.health.state()
						if ws.strategy == "" {
							cur = w // the scheduler's own rounding
						}
					}
				}
				if tc := tg.Tier; tc != nil {
					ts.Tier = tc
				}
				as.Targets = append(as.Targets, ts)
			}
			if c := al.chain; c != nil {
				as.Degrade = c.state(t)
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
		if a := vg.added.Load(); a != nil {
			for _, ep := range a.eps {
				es := vg.endpointState(ep, grp.expect, t)
				es.Added = true
				gs.Endpoints = append(gs.Endpoints, es)
			}
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
		gs.Breaker = breakerState(&grp.shared.breaker, t)
	}
	if grp.shared != nil && grp.vllm == nil {
		gs.RateLimitedUntil = heldUntil(&grp.shared.breaker, t)
	}
	if grp.Kind == KindOpenAI && !grp.checkOff && len(grp.expect) > 0 {
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
		Weight:        ep.weightNow(),
	}
	if ep.br != nil {
		es.RateLimitedUntil = heldUntil(ep.br, t)
	}
	if vg.breakers && ep.br != nil {
		es.Breaker = breakerState(ep.br, t)
	}
	es.Drained = ep.drained != nil && ep.drained.Load()
	if sc := ep.score; sc != nil {
		pct := int(math.Round(sc.share() * 100))
		es.HealthScore, _ = sc.hm.state()
		es.ServePercent = &pct
	}
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
