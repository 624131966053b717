// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/degrade"
)

// DegradeConfig is an alias's degradation chain: its targets marked as
// tiers take the requests its upper targets cannot serve, with a lower
// quality. Unlike a fallback (a copy of the same model elsewhere), a
// degraded answer is marked, sent only to tiers that produce the format
// the request needs, decided before the first byte, and capped.
type DegradeConfig struct {
	// The most degraded answers may make of the alias's answered
	// requests over the window, 0 to 1. Default: 0.2; 1: no cap.
	Cap *float64 `json:"cap,omitempty"`

	// The sliding window of the cap. Default: 1m.
	Window caddy.Duration `json:"window,omitempty"`

	// What a request that would pass the cap does: `refuse` (the
	// tiers are passed over: the targets after them, if any, else 503
	// with Retry-After) or `allow` (it degrades anyway; the alert
	// stands). Default: refuse.
	AtCap string `json:"at_cap,omitempty"`

	// Mark degraded answers in the body too: a top-level `degraded`
	// object in a JSON answer and in a stream's first chunk. Default:
	// headers only (strict clients may refuse unknown fields).
	MarkBody bool `json:"mark_body,omitempty"`

	// The upper targets' latency objective (p99 time to first token),
	// for the latency trigger: new requests degrade while a target's
	// p99 is over slo_factor × this and its queue deeper than
	// queue_depth. A target's own `slo` overrides it. Default: none
	// (the trigger is off).
	SLO caddy.Duration `json:"slo,omitempty"`

	// Default: 1.5.
	SLOFactor float64 `json:"slo_factor,omitempty"`

	// Default: 10.
	QueueDepth float64 `json:"queue_depth,omitempty"`

	// The KV-cache usage (0..1) over which, while it rises over
	// kv_window, new requests degrade before the upper target runs out
	// of cache. Default: 0.85; 0 turns it off.
	KVCache *float64 `json:"kv_cache,omitempty"`

	// Default: 5s.
	KVWindow caddy.Duration `json:"kv_window,omitempty"`

	// The shortest time a trigger's state is held. Default: 10s.
	Dwell caddy.Duration `json:"dwell,omitempty"`
}

// TierConfig marks a target as a degraded tier of its alias.
type TierConfig struct {
	// Its quality relative to the upper targets, 0 to 1; reported.
	Quality *float64 `json:"quality,omitempty"`

	// The longest answer it is asked for: a request asking for more (or
	// not saying) is sent with this, and the answer says so.
	MaxTokens int `json:"max_tokens,omitempty"`

	// The structured outputs it produces reliably: `json_schema`,
	// `json_object`, `tools`. A request that needs one goes only to
	// tiers that list it. Default: none.
	Formats []string `json:"formats,omitempty"`
}

// Output formats a request may need.
const (
	formatJSONSchema = "json_schema"
	formatJSONObject = "json_object"
	formatTools      = "tools"
)

const (
	atCapRefuse = "refuse"
	atCapAllow  = "allow"
)

// degradeMinAnswers is the least window the cap judges on: an idle
// alias's first degraded answer is not a share of 100 %.
const degradeMinAnswers = 10

// DegradeChain is an alias's degradation runtime.
type DegradeChain struct {
	Cap      float64
	atCap    string
	MarkBody bool
	share    *degrade.Share
	window   time.Duration
	// the cap was reached: logged once per crossing
	capped atomic.Bool
	// the alias's triggers, for the state
	triggers []*DegradeTrigger
}

// DegradeTrigger is one upper target's trigger: evaluated by the
// gateway's scheduler from its group's signals, read by requests.
type DegradeTrigger struct {
	alias  string
	Target *Target
	Active atomic.Bool
	mu     sync.Mutex
	tr     *degrade.Trigger
	d      degrade.Decision // the last, under mu
}

var (
	DegradedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNS, Name: "degraded_total",
		Help: "Degraded answers, by alias, the upper target's group they were meant for (from), the tier's group that answered (to) and reason.",
	}, []string{"gateway", "alias", "from", "to", "reason"})
)

// provisionChain checks the alias's tiers and sets up its degradation
// runtime (al.Chain, and its targets' triggers); an alias without tiers
// has none.
func provisionChain(al *Alias) error {
	first := slices.IndexFunc(al.Targets, func(t *Target) bool { return t.Tier != nil })
	if first < 0 {
		if al.Degrade != nil {
			return fmt.Errorf("degrade needs tiers (targets marked tier)")
		}
		return nil
	}
	if first == 0 {
		return fmt.Errorf("the first target is a tier: a degraded tier needs an upper target before it")
	}
	dc := al.Degrade
	if dc == nil {
		dc = new(DegradeConfig)
	}
	c := &DegradeChain{Cap: 0.2, atCap: atCapRefuse, MarkBody: dc.MarkBody}
	if dc.Cap != nil {
		c.Cap = *dc.Cap
	}
	switch {
	case math.IsNaN(c.Cap) || c.Cap < 0 || c.Cap > 1:
		return fmt.Errorf("degrade: cap must be a share from 0 to 1")
	case dc.Window < 0 || dc.SLO < 0 || dc.KVWindow < 0 || dc.Dwell < 0 || dc.SLOFactor < 0 || dc.QueueDepth < 0:
		return fmt.Errorf("degrade: values must not be negative")
	case dc.KVCache != nil && (math.IsNaN(*dc.KVCache) || *dc.KVCache < 0 || *dc.KVCache > 1):
		return fmt.Errorf("degrade: kv_cache must be a share from 0 to 1")
	}
	switch dc.AtCap {
	case "", atCapRefuse:
	case atCapAllow:
		c.atCap = atCapAllow
	default:
		return fmt.Errorf("degrade: at_cap must be refuse or allow, got %q", dc.AtCap)
	}
	window := time.Minute
	if dc.Window > 0 {
		window = time.Duration(dc.Window)
	}
	c.share, c.window = degrade.NewShare(window), window
	for i, t := range al.Targets {
		if tc := t.Tier; tc != nil {
			if t.Set != "" {
				return fmt.Errorf("target %d (group %q): a tier cannot be in a weighted set", i, t.Group)
			}
			if tc.MaxTokens < 0 || (tc.Quality != nil && (math.IsNaN(*tc.Quality) || *tc.Quality < 0 || *tc.Quality > 1)) {
				return fmt.Errorf("target %d (group %q): tier max_tokens must not be negative, quality a share from 0 to 1", i, t.Group)
			}
			for _, f := range tc.Formats {
				if f != formatJSONSchema && f != formatJSONObject && f != formatTools {
					return fmt.Errorf("target %d (group %q): unknown tier format %q: want json_schema, json_object or tools", i, t.Group, f)
				}
			}
		}
		// a vllm target with a tier after it may degrade its new requests
		if t.Upstream.VLLM == nil || !slices.ContainsFunc(al.Targets[i+1:], func(o *Target) bool { return o.Tier != nil }) {
			continue
		}
		cfg := degrade.Config{SLO: time.Duration(dc.SLO), Factor: dc.SLOFactor, QueueDepth: dc.QueueDepth,
			KVWindow: time.Duration(dc.KVWindow), Dwell: time.Duration(dc.Dwell)}
		if t.SLO > 0 {
			cfg.SLO = time.Duration(t.SLO)
		}
		if dc.KVCache != nil {
			cfg.KVLevel = *dc.KVCache
			if cfg.KVLevel == 0 {
				cfg.KVLevel = -1 // off
			}
		}
		dt := &DegradeTrigger{alias: al.Name, Target: t, tr: degrade.NewTrigger(cfg)}
		t.Trigger = dt
		c.triggers = append(c.triggers, dt)
	}
	al.Chain = c
	return nil
}

// RetryAfter is the wait advised at the cap: a slot of the window, after
// which its oldest answers leave the share.
func (c *DegradeChain) RetryAfter() time.Duration {
	return max(time.Second, c.window/12)
}

// State renders the chain for the state document.
func (c *DegradeChain) State(t time.Time) *adminapi.DegradeState {
	a, d := c.share.At(t)
	ds := &adminapi.DegradeState{Answered: a, Degraded: d, Cap: c.Cap, CapReached: c.capped.Load(),
		Triggers: []adminapi.DegradeTriggerState{}}
	if a > 0 {
		ds.Share = float64(d) / float64(a)
	}
	for _, dt := range c.triggers {
		dec := dt.decision()
		ts := adminapi.DegradeTriggerState{Group: dt.Target.Group, Model: dt.Target.Model, Active: dec.Active, Reason: dec.Reason,
			Why: dec.Why, Metadata: dec.Metadata}
		if !dec.Since.IsZero() {
			ts.Since = dec.Since.UTC().Format(time.RFC3339)
		}
		ds.Triggers = append(ds.Triggers, ts)
	}
	return ds
}

// observe evaluates the trigger from its group's signals at t, logging a
// change.
func (dt *DegradeTrigger) observe(t time.Time, logger *zap.Logger) {
	s := dt.Target.Upstream.VLLM.Signals(t)
	dt.mu.Lock()
	d, changed := dt.tr.Observe(t, degrade.Signals{P99: s.TTFTP99, Queue: s.Waiting, KV: s.KV})
	dt.d = d
	dt.Active.Store(d.Active)
	dt.mu.Unlock()
	if !changed {
		return
	}
	fields := []zap.Field{zap.String("alias", dt.alias), zap.String("group", dt.Target.Group), zap.String("model", dt.Target.Model)}
	if d.Active {
		for _, k := range slices.Sorted(maps.Keys(d.Metadata)) {
			fields = append(fields, zap.Float64(k, d.Metadata[k]))
		}
		logger.Warn("degrade on: "+dt.Target.Group+" "+d.Reason+": "+d.Why+"; new requests go to the lower tiers", fields...)
		return
	}
	logger.Info("degrade off: "+dt.Target.Group+" "+d.Why, fields...)
}

// decision returns the trigger's state.
func (dt *DegradeTrigger) decision() degrade.Decision {
	dt.mu.Lock()
	defer dt.mu.Unlock()
	return dt.d
}

// tierGate passes over a tier of the alias's chain that cannot take the
// request: the format it needs, or the cap on degraded answers. At the
// tier's turn the request takes its place in the cap's share (once per
// request), so that requests in flight count; it keeps it until it ends
// (see DegradeChain.Settle), whatever the gates after this one say.
type tierGate struct {
	takesNothing
	chain  *DegradeChain
	alias  string
	clock  clock.Clock
	logger *zap.Logger
}

func (g tierGate) Judge(p *Passage, t *Target) Reason {
	if why := tierFormat(p, t); why != "" {
		return why
	}
	c := g.chain
	if c.Cap >= 1 || p.Degradation.reserved {
		return ""
	}
	if !c.share.Allows(g.clock.Now(), c.Cap, degradeMinAnswers) {
		c.reached(g.clock.Now(), g.logger, g.alias)
		if c.atCap == atCapRefuse {
			return because.DegradeCap
		}
	}
	return ""
}

func (g tierGate) Admit(p *Passage, t *Target) Reason {
	if why := tierFormat(p, t); why != "" {
		return why
	}
	c := g.chain
	if c.Cap >= 1 || p.Degradation.reserved {
		return ""
	}
	ok := c.share.Reserve(g.clock.Now(), c.Cap, degradeMinAnswers)
	p.Degradation.reserved = ok
	if !ok {
		c.reached(g.clock.Now(), g.logger, g.alias)
		if c.atCap == atCapRefuse {
			return because.DegradeCap
		}
		c.share.Reserve(g.clock.Now(), 1, 0) // allowed past the cap: counted all the same
		p.Degradation.reserved = true
	}
	return ""
}

// tierFormat returns why tier t cannot take the request for its format.
func tierFormat(p *Passage, t *Target) Reason {
	for _, need := range p.Degradation.formatsOf(p.Bounds.Asked.Features.body) {
		if !slices.Contains(t.Tier.Formats, need) {
			return because.Format
		}
	}
	return ""
}

// triggerGate passes over an upper target of the alias's chain whose
// trigger is on, while a tier after it in the plan can take the request
// (judged without effects: no cloud hold, no overflow controller driven,
// no place in the cap taken). At its turn it records what the trigger saw
// and leaves the target to be tried after all, last (Passage.Requeue),
// should the tiers fail; it lets it through then.
type triggerGate struct{ takesNothing }

func (triggerGate) Judge(p *Passage, t *Target) Reason {
	if p.Degradation.deferred == t || !LeavesForTier(p, t) {
		return ""
	}
	if d := t.Trigger.decision(); d.Active {
		return Reason(d.Reason)
	}
	return ""
}

func (triggerGate) Admit(p *Passage, t *Target) Reason {
	if p.Degradation.deferred == t || !LeavesForTier(p, t) {
		return "" // the tiers failed: its turn after all
	}
	d := t.Trigger.decision()
	if !d.Active {
		return ""
	}
	p.Degradation.Meta, p.Degradation.deferred, p.Requeue = d.Metadata, t, t
	return Reason(d.Reason)
}

// LeavesForTier reports whether the request should leave target t for a
// lower tier before trying it: its trigger is on, and a tier after it in
// the plan can take the request.
func LeavesForTier(p *Passage, t *Target) bool {
	if !t.Trigger.Active.Load() {
		return false
	}
	for _, o := range p.Rest {
		if o.Tier != nil && p.Judge(o) == "" {
			return true
		}
	}
	return false
}

// UnservedFormat returns the format the request (body) needs that kept
// it from every tier, if that is why its attempts failed.
func (d *DegradeRecord) UnservedFormat(attempts []Attempt, body []byte) string {
	formatRefused := false
	for _, a := range attempts {
		formatRefused = formatRefused || a.Reason == because.Format
	}
	if !formatRefused {
		return ""
	}
	return strings.Join(d.formatsOf(body), ", ")
}

// reached logs the cap's crossing at t once, until the share is under it
// again.
func (c *DegradeChain) reached(t time.Time, logger *zap.Logger, alias string) {
	if c.capped.CompareAndSwap(false, true) {
		logger.Error("degrade cap reached: degraded answers would pass their share; no further degrading",
			zap.String("alias", alias), zap.Float64("cap", c.Cap), zap.Float64("share", c.share.Ratio(t)),
			zap.String("at_cap", c.atCap))
	}
}

// capClearAt is the share of the cap the degraded share must fall under
// to end a crossing: a dead band, so that a share held at the cap by a
// trigger is one crossing, not one per answer.
const capClearAt = 0.8

// Settle counts a request ended at t in its alias's share: its answer,
// if it was answered (not by a 5xx), and the place it reserved (in d)
// given back.
func (c *DegradeChain) Settle(d *DegradeRecord, answered bool, t time.Time) {
	if answered {
		c.share.Add(t, d.Degraded)
	}
	if d.reserved {
		c.share.Release()
	}
}

// tick ends a cap crossing once the share is well under the cap again,
// judged as the cap judges it; run by the scheduler, so that an alias that
// went quiet does not keep its alert.
func (c *DegradeChain) tick(t time.Time, logger *zap.Logger, alias string) {
	if !c.capped.Load() {
		return
	}
	if share := c.share.Judged(t, degradeMinAnswers); share < capClearAt*c.Cap && c.capped.CompareAndSwap(true, false) {
		logger.Info("degrade cap: the share is under the cap again",
			zap.String("alias", alias), zap.Float64("cap", c.Cap), zap.Float64("share", share))
	}
}
