// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/hybridllm/caddy-hybrid-llm/module/registry"
	"github.com/hybridllm/caddy-hybrid-llm/module/vllmmetrics"
	"go.uber.org/zap"
)

// defaultAssumedSeqs stands in for max_num_seqs when none is configured
// (vLLM's default on most GPUs).
const defaultAssumedSeqs = 256

// kvWeight is how much KV-cache usage (0..1) adds to the load score: a
// tie-breaker after the waiting queue and the running share.
const kvWeight = 0.1

// VLLMGroup is the runtime of a vLLM group: its endpoints with their
// probers and limits.
type VLLMGroup struct {
	Name     string
	Settings Settings
	// with a registry: this gateway's place among the live ones, which
	// split each endpoint's red line
	Share      atomic.Pointer[fleet.Share]
	Endpoints  map[string]*Endpoint                 // by dial address; read-only once provisioned
	byUpstream map[*reverseproxy.Upstream]*Endpoint // the static upstreams
	poolCache  atomic.Pointer[poolEndpoints]
	released   bool
	Scored     bool        // the endpoints are health-scored (the group's health)
	clock      clock.Clock // of staleness, breakers and holds

	// the endpoints a registry adds beside the config's, and how
	Added atomic.Pointer[AddedEndpoints]
	adds  endpointAdds
}

// Settings are a vLLM group's settings, resolved from its config.
type Settings struct {
	maxNumSeqs int
	maxQueue   int
	StaleAfter time.Duration
	unknownOK  bool
	maxLoad    float64          // with affinity: its max_load; 0: none
	session    *AffinityConfig  // with affinity: where a session is named
	classes    *priority.Shares // with classes: the red line by class
	Breakers   bool             // endpoint breakers are on
	breaker    *breaker.Config  // their config
	uneject    bool             // probes may end a cooldown (breaker uneject_on_probe)
	rise       int              // the group's probe rise count
}

// endpointAdds is how a vLLM group adds and removes the endpoints a
// registry lists.
type endpointAdds struct {
	mu      sync.Mutex // serializes changes to added
	spawn   func(dial string) (*Endpoint, error)
	unspawn func(*Endpoint)
	off     bool // the group is cleaned up: nothing more is added
	running bool // its config runs: added endpoints are probed at once
}

// Endpoint is one vLLM replica of a group.
type Endpoint struct {
	Dial       string
	Prober     *probe.Prober
	Breaker    *breaker.Breaker // consulted when the group has a breaker
	Drained    *atomic.Bool     // set through the admin API
	MaxNumSeqs int
	weight     float64        // the config's
	regWeight  atomic.Uint64  // with a registry: its weight there (float64 bits; 0: none)
	Score      *EndpointScore // with the group's health
	Added      bool           // listed by the registry: selected once its probes say it is up
}

// WeightNow is the endpoint's weight: the registry's, else the config's.
func (ep *Endpoint) WeightNow() float64 {
	if b := ep.regWeight.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return ep.weight
}

// RedLine is the most requests the gateway keeps in flight to the
// endpoint; 0 means no limit.
func (g *VLLMGroup) RedLine(ep *Endpoint) int64 {
	n := ep.MaxNumSeqs
	if n == 0 {
		n = g.Settings.maxNumSeqs
	}
	if n == 0 {
		return 0
	}
	return g.shareOf(n + g.Settings.maxQueue)
}

// shareOf is this gateway's share of an endpoint's limit among the live
// gateways of a registry; redLineNone when the share is nothing.
func (g *VLLMGroup) shareOf(limit int) int64 {
	sh := g.Share.Load()
	if sh == nil || sh.N <= 1 {
		return int64(limit)
	}
	if v := registry.Share(limit, sh.Rank, sh.N); v > 0 {
		return int64(v)
	}
	return redLineNone
}

// redLineNone is a red line that admits nothing: this gateway's share of
// the endpoint, with more gateways than the endpoint's slots.
const redLineNone = -1

// endpointView is what the score is computed from.
type endpointView struct {
	health      int32
	modelsKnown bool
	serves      bool
	load        *vllmmetrics.ModelLoad // nil: no fresh metrics
	pending     bool                   // no metrics yet, but the prober is young
	unknownOK   bool                   // unknown_metrics ok: no fresh metrics is no reason to skip
	inflight    int64                  // the gateway's own count, now
	atScrape    int64                  // the gateway's count when the metrics were taken
	redLine     int64
	maxNumSeqs  int
	weight      float64
	kvPart      float64 // what KV-cache usage added to the last score
}

// roomToSpare reports whether the endpoint can take a mirror's copy: no
// queue, and a quarter of its red line (one request at least) free.
func (v *endpointView) roomToSpare() bool {
	if v.load != nil && v.load.Waiting > 0 {
		return false
	}
	return v.redLine == 0 || v.inflight < v.redLine-max(1, v.redLine/4)
}

// score returns the endpoint's load score (lower is better), or why it
// must not get the request. The order of importance is the waiting queue,
// then the running share of max_num_seqs, then KV-cache usage. vLLM's
// gauges lag; requests the gateway sent or finished since the scrape
// correct them, and the gateway's own in-flight count is a floor.
func (v *endpointView) score() (float64, reason) {
	switch {
	case v.health == probe.HealthDown:
		return 0, because.Unhealthy
	case v.modelsKnown && !v.serves:
		return 0, because.Misconfig
	case v.redLine != 0 && v.inflight >= v.redLine:
		return 0, because.RedLine
	case v.load == nil && !v.pending && !v.unknownOK:
		return 0, because.StaleMetrics
	}
	n := float64(v.maxNumSeqs)
	if n <= 0 {
		n = defaultAssumedSeqs
	}
	total := float64(v.inflight)
	running, waiting, kv := 0.0, 0.0, 0.0
	if v.load != nil {
		total = max(v.load.Running+v.load.Waiting+float64(v.inflight-v.atScrape), total)
		if !math.IsNaN(v.load.KVUsage) {
			kv = v.load.KVUsage
		}
		if v.load.Waiting > 0 {
			// vLLM already queues (full, or out of KV cache): what
			// arrived since joins the queue
			running = min(v.load.Running, n)
			waiting = max(total-running, 0)
		}
	}
	if waiting == 0 {
		running = min(total, n)
		waiting = total - running
	}
	v.kvPart = kvWeight * kv
	s := waiting + running/n + v.kvPart
	if v.weight > 0 {
		s /= v.weight
		v.kvPart /= v.weight
	}
	return s, ""
}

// view builds the endpoint's view for a model at time t.
func (g *VLLMGroup) view(ep *Endpoint, model string, t time.Time) endpointView {
	snap := ep.Prober.Snapshot()
	v := endpointView{
		health:     snap.Health,
		inflight:   ep.Prober.Inflight.Load(),
		atScrape:   snap.InflightAtScrape,
		redLine:    g.RedLine(ep),
		maxNumSeqs: ep.MaxNumSeqs,
		weight:     ep.WeightNow(),
		unknownOK:  g.Settings.unknownOK,
	}
	if v.maxNumSeqs == 0 {
		v.maxNumSeqs = g.Settings.maxNumSeqs
	}
	if snap.Models != nil {
		v.modelsKnown = true
		// all expected names served is the common case: no lookup
		v.serves = !snap.AnyMissing
		if !v.serves {
			_, v.serves = snap.Models[model]
		}
	}
	switch {
	case !snap.MetricsAt.IsZero() && t.Sub(snap.MetricsAt) <= g.Settings.StaleAfter:
		v.load = snap.LoadFor(model) // nil: this model's series is missing
	case snap.MetricsAt.IsZero() && t.Sub(ep.Prober.Born()) < g.Settings.StaleAfter:
		v.pending = true
	}
	return v
}

// skipRank orders the reasons for an empty group, most telling first.
func skipRank(why reason) int {
	switch why {
	case because.RedLine, because.ClassReserve:
		return 6
	case because.StaleMetrics:
		return 5
	case because.BreakerOpen, because.RateLimited, because.Degraded:
		return 4
	case because.Drained:
		return 4
	case because.Avoided:
		return 3
	case because.Unhealthy:
		return 2
	case because.Misconfig:
		return 1
	}
	return 0
}

// selectEndpoint picks the least-loaded eligible upstream of the pool for
// the slot's model, avoiding endpoints that failed the request already,
// reserves an in-flight slot on it and, when its breaker is half-open,
// takes the trial. It records the pick (or why there is none) in the slot.
func (g *VLLMGroup) selectEndpoint(pool reverseproxy.UpstreamPool, slot *Slot) *reverseproxy.Upstream {
	t := g.clock.Now()
	var excluded [4]*Endpoint
	for round := range len(excluded) { // a lost race for a slot or a trial re-evaluates
		c := g.scan(pool, slot, t, excluded[:round])
		pick := c.best
		if a, ok := c.aff.pick(g.Settings.maxLoad); ok {
			pick, slot.ByAffinity = a, true // the conversation's endpoint
		}
		if pick.u == nil {
			pick = c.spare
		}
		switch {
		case pick.u == nil:
			slot.Skip = cmp.Or(c.skip, because.NoEndpoint)
			return nil
		case pick.ep == nil:
			slot.Skip = ""
			return pick.u // an unprobed upstream: nothing to reserve
		}
		excluded[round] = pick.ep
		if g.take(pick.ep, slot, t) {
			return pick.u
		}
	}
	slot.Skip = because.RedLine
	if g.Settings.classes != nil && slot.Class != priority.Interactive {
		slot.Skip = because.ClassReserve
	}
	return nil
}

// candidate is an upstream a request may go to, and its load score.
type candidate struct {
	u     *reverseproxy.Upstream
	ep    *Endpoint // nil: not probed
	score float64
	kv    float64 // what KV-cache usage adds to score
}

// choice is what one scan of a group's upstreams found: the best
// candidate, the best of the endpoints ramping back that sat the request
// out (should no other be eligible), and the weightiest reason one was
// skipped.
type choice struct {
	best, spare candidate
	skip        reason
	aff         ranked // with a conversation's key and the group's affinity
}

func (c *choice) note(why reason) {
	if skipRank(why) > skipRank(c.skip) {
		c.skip = why
	}
}

// scan weighs the pool's upstreams, then those the registry added, for
// the slot at time t, leaving out the endpoints excluded.
func (g *VLLMGroup) scan(pool reverseproxy.UpstreamPool, slot *Slot, t time.Time, excluded []*Endpoint) choice {
	c := choice{best: candidate{score: math.Inf(1)}, spare: candidate{score: math.Inf(1)}}
	ups, eps := pool, g.endpointsOf(pool)
	for seg := range 2 {
		if seg == 1 { // then the endpoints the registry added, if any
			added := g.Added.Load()
			if added == nil {
				break
			}
			ups, eps = added.Upstreams, added.Endpoints
		}
		for i, u := range ups {
			g.weigh(&c, u, eps[i], slot, t, excluded)
		}
	}
	return c
}

// weigh puts one upstream (ep its endpoint, nil if not probed) into the
// choice, or notes why it may not take the request.
func (g *VLLMGroup) weigh(c *choice, u *reverseproxy.Upstream, ep *Endpoint, slot *Slot, t time.Time, excluded []*Endpoint) {
	switch {
	case slot.Pin != "" && u.Dial != slot.Pin:
		return // a drill of another endpoint
	case !u.Available():
		c.note(unavailable(u))
		return
	case ep == nil:
		// not probed (a unix socket, a placeholder): balanced on Caddy's
		// own request count, without a reserved slot
		s, why := g.unprobedScore(u, slot.Class)
		if why != "" {
			c.note(why)
			return
		}
		g.consider(c, slot, candidate{u: u, score: s})
		return
	case slices.Contains(excluded, ep):
		return
	}
	s, kv, why, spareOnly := g.eligible(ep, slot, t)
	switch {
	case why != "":
		c.note(why)
	case spareOnly || (ep.Score != nil && !ep.Score.Admits()):
		// ramping back: it takes its share of the requests
		if s < c.spare.score {
			c.spare = candidate{u: u, ep: ep, score: s, kv: kv}
		}
	default:
		g.consider(c, slot, candidate{u: u, ep: ep, score: s, kv: kv})
	}
}

// Affine reports whether the group sends a conversation to its endpoint
// (see AffinityConfig).
func (g *VLLMGroup) Affine() bool { return g.Settings.maxLoad > 0 }

// WakeQueue wakes every sheddable request waiting for the group: its
// capacity may have grown (a fleet's share, endpoints added or undrained).
func (g *VLLMGroup) WakeQueue() {
	if c := g.Settings.classes; c != nil {
		c.Queue.WakeAll()
	}
}

// Classes is the group's priority classes; nil without them.
func (g *VLLMGroup) Classes() *priority.Shares { return g.Settings.classes }

// Session is where a request names its conversation for the group's
// affinity: a header and a body field, "" for none.
func (g *VLLMGroup) Session() (header, field string) {
	if s := g.Settings.session; s != nil {
		return s.SessionHeader, s.SessionField
	}
	return "", ""
}

// consider puts an eligible candidate into the choice: the least loaded
// so far, and ranked for the slot's conversation when the group has
// affinity.
func (g *VLLMGroup) consider(c *choice, slot *Slot, cand candidate) {
	if slot.Affinity != 0 && g.Settings.maxLoad > 0 {
		c.aff.add(slot.Affinity, cand.u.Dial, cand, g.unitOf(cand.ep))
	}
	if cand.score < c.best.score {
		c.best = cand
	}
}

// unitOf is the load score one more request adds to an endpoint (nil:
// one not probed) while it has free slots: 1/max_num_seqs of it, by its
// weight.
func (g *VLLMGroup) unitOf(ep *Endpoint) float64 {
	n, w := g.Settings.maxNumSeqs, 1.0
	if ep != nil {
		n = cmp.Or(ep.MaxNumSeqs, n)
		if ew := ep.WeightNow(); ew > 0 {
			w = ew
		}
	}
	return 1 / float64(cmp.Or(n, defaultAssumedSeqs)) / w
}

// unavailable says why Caddy holds an upstream back.
func unavailable(u *reverseproxy.Upstream) reason {
	if u.Full() {
		return because.RedLine // Caddy's max_requests
	}
	return because.Unhealthy
}

// unprobedScore scores an upstream the group does not probe on Caddy's
// own request count.
func (g *VLLMGroup) unprobedScore(u *reverseproxy.Upstream, class priority.Class) (float64, reason) {
	n := int64(u.NumRequests())
	v := endpointView{health: probe.HealthUp, inflight: n, atScrape: n, maxNumSeqs: g.Settings.maxNumSeqs, weight: 1, unknownOK: true}
	if g.Settings.maxNumSeqs > 0 {
		v.redLine = g.shareOf(g.Settings.maxNumSeqs + g.Settings.maxQueue)
	}
	s, why := v.score()
	if why == "" && g.Settings.classes != nil && v.redLine != 0 && n >= g.Settings.classes.Limit(class, v.redLine) {
		why = because.ClassReserve // the rest is the classes' above
	}
	return s, why
}

// eligible scores a probed endpoint for the slot at t (kv: what its
// KV-cache usage adds to the score), or says why it cannot take the
// request; spareOnly is an endpoint a drill may try only when nothing
// else answers.
func (g *VLLMGroup) eligible(ep *Endpoint, slot *Slot, t time.Time) (s, kv float64, why reason, spareOnly bool) {
	switch {
	case ep.Drained != nil && ep.Drained.Load():
		if !slot.Drill {
			return 0, 0, because.Drained, false
		}
		// a drill tries what serves first, a drained endpoint when
		// nothing else answers
		spareOnly = true
	case ep.Added && ep.Prober.Snapshot().Health != probe.HealthUp:
		return 0, 0, because.Unhealthy, false // not probed yet, or down
	case slices.Contains(slot.Avoid, ep):
		return 0, 0, because.Avoided, false
	case ep.Breaker.Held(t):
		return 0, 0, because.RateLimited, false
	case g.Settings.Breakers && slot.Shadow && !ep.Breaker.Closed():
		return 0, 0, because.BreakerOpen, false // a copy never takes a real request's trial
	case g.Settings.Breakers && !slot.Drill && !slot.Shadow && !ep.Breaker.WouldAllow(t) && !(g.Settings.uneject && ep.Breaker.Uneject(ep.Prober, g.Settings.rise, t)):
		return 0, 0, because.BreakerOpen, false
	case ep.Score != nil && ep.Score.Fine.Load() == 0:
		return 0, 0, because.Degraded, false // its health score took it out
	}
	v := g.view(ep, slot.Model, t)
	if s, why = v.score(); why == "" && slot.Shadow && !v.roomToSpare() {
		why = because.RedLine // a mirror's copy never crowds real requests
	}
	if why == "" && g.Settings.classes != nil && v.redLine != 0 && v.inflight >= g.Settings.classes.Limit(slot.Class, v.redLine) {
		why = because.ClassReserve // the rest is the classes' above
	}
	return s, v.kvPart, why, spareOnly
}

// take reserves an in-flight slot on the endpoint picked and, when its
// breaker is half-open, takes the trial; it reports false when another
// request took the last of either first.
func (g *VLLMGroup) take(ep *Endpoint, slot *Slot, t time.Time) bool {
	limit := g.RedLine(ep)
	if g.Settings.classes != nil {
		limit = g.Settings.classes.Limit(slot.Class, limit)
	}
	if !ep.Prober.Reserve(limit) {
		return false
	}
	trial := false
	if g.Settings.Breakers && !slot.Shadow && !slot.Drill {
		// copies and drills leave the breaker alone: no verdict of
		// theirs is ever recorded
		var ok bool
		if ok, trial = ep.Breaker.Allow(t); !ok {
			ep.Prober.Inflight.Add(-1)
			return false
		}
	}
	slot.Endpoint, slot.held, slot.Trial, slot.Skip = ep, ep.Prober, trial, ""
	return true
}

// poolEndpoints maps one pool slice to the group's endpoints, in order.
type poolEndpoints struct {
	first *reverseproxy.Upstream
	n     int
	eps   []*Endpoint
}

// endpointsOf returns the endpoint of each upstream of the pool (nil for
// those not probed). The proxy passes the same static pool every time, so
// the mapping is kept and reused while the pool is unchanged.
func (g *VLLMGroup) endpointsOf(pool reverseproxy.UpstreamPool) []*Endpoint {
	if len(pool) == 0 {
		return nil
	}
	if c := g.poolCache.Load(); c != nil && c.first == pool[0] && c.n == len(pool) {
		same := true
		for i, u := range pool {
			if c.eps[i] != nil && c.eps[i].Dial != u.Dial {
				same = false
				break
			}
		}
		if same {
			return c.eps
		}
	}
	c := &poolEndpoints{first: pool[0], n: len(pool), eps: make([]*Endpoint, len(pool))}
	for i, u := range pool {
		if ep := g.byUpstream[u]; ep != nil {
			c.eps[i] = ep
		} else {
			c.eps[i] = g.Endpoints[u.Dial]
		}
	}
	g.poolCache.Store(c)
	return c.eps
}

// provisionVLLM starts (or joins) the probers of the group's endpoints.
func (grp *Group) provisionVLLM(ctx caddy.Context) error {
	settings, staleAfter, unknownOK, err := grp.Probe.Provision()
	if err != nil {
		return err
	}
	settings.APIKey = grp.Run.key
	settings.Expect = grp.Run.Expect
	maxLoad, err := grp.Affinity.resolve()
	if err != nil {
		return err
	}
	var classes *priority.Shares
	if grp.Classes != nil {
		if classes, err = grp.Classes.Resolve(); err != nil {
			return err
		}
		if grp.Shared != nil {
			classes.Queue = grp.Shared.Waitlist(classes.QueueSize)
		}
		if n := grp.MaxNumSeqs; n > 0 {
			for _, c := range []priority.Class{priority.Standard, priority.Batch} {
				if classes.Limit(c, int64(n+grp.MaxQueue)) <= 0 {
					ctx.Logger().Warn("a class's share of the red line is less than one request: its requests never go to this group",
						zap.String("group", grp.Run.Name), zap.String("class", c.String()), zap.Int("red_line", n+grp.MaxQueue),
						zap.Float64("share", classes.Share(c)))
				}
			}
		}
	}
	vg := &VLLMGroup{
		Name: grp.Run.Name,
		Settings: Settings{maxNumSeqs: grp.MaxNumSeqs, maxQueue: grp.MaxQueue, StaleAfter: staleAfter, unknownOK: unknownOK,
			Breakers: grp.Breaker != nil, breaker: grp.Breaker, uneject: grp.Breaker != nil && grp.Breaker.ProbesEndCooldown(),
			rise: settings.Rise, maxLoad: maxLoad, session: grp.Affinity, classes: classes},
		Endpoints:  make(map[string]*Endpoint),
		byUpstream: make(map[*reverseproxy.Upstream]*Endpoint),
		clock:      grp.Run.Clock,
	}
	grp.VLLM = vg
	scheme := "http"
	if ht, ok := grp.Run.Proxy.Transport.(*reverseproxy.HTTPTransport); ok {
		// probes go out through the group's own transport: its TLS
		// settings (a private CA, client certificates, skip verify)
		settings.Transport = ht
		if ht.TLSEnabled() {
			scheme = "https"
		}
	}
	vg.adds.spawn = func(dial string) (*Endpoint, error) {
		p, err := probe.Acquire(scheme+"://"+dial, grp, settings, grp.Run.Clock, ctx.Logger())
		if err != nil {
			return nil, err
		}
		es := grp.Shared.Endpoint(dial)
		return &Endpoint{Dial: dial, Prober: p, weight: 1, Breaker: &es.Breaker, Drained: &es.Drained}, nil
	}
	vg.adds.unspawn = func(ep *Endpoint) { probe.Release(ep.Prober, grp) }
	for _, u := range grp.Run.Proxy.Upstreams {
		if !probeable(u.Dial) {
			ctx.Logger().Warn("upstream address cannot be probed; it is balanced on in-flight counts only",
				zap.String("group", grp.Run.Name), zap.String("upstream", u.Dial))
			continue
		}
		if ep, dup := vg.Endpoints[u.Dial]; dup {
			vg.byUpstream[u] = ep
			continue
		}
		ep, err := vg.adds.spawn(u.Dial)
		if err != nil {
			return fmt.Errorf("probing %s: %v", u.Dial, err)
		}
		vg.Endpoints[u.Dial] = ep
		vg.byUpstream[u] = ep
	}
	for dial, ec := range grp.Endpoints {
		ep := vg.Endpoints[dial]
		if ep == nil || ec == nil {
			return fmt.Errorf("endpoint %q is not an upstream of the group", dial)
		}
		if ec.MaxNumSeqs < 0 || ec.Weight < 0 {
			return fmt.Errorf("endpoint %q: max_num_seqs and weight must not be negative", dial)
		}
		ep.MaxNumSeqs = ec.MaxNumSeqs
		if ec.Weight > 0 {
			ep.weight = ec.Weight
		}
	}
	if len(grp.Run.Proxy.Upstreams) == 0 && grp.Run.Proxy.DynamicUpstreams != nil {
		ctx.Logger().Warn("dynamic upstreams are not probed; the group is balanced on in-flight counts only",
			zap.String("group", grp.Run.Name))
	}
	return nil
}

// Begin starts the probes of the group's endpoints, and of those the
// registry adds from now on.
func (g *VLLMGroup) Begin() {
	g.adds.mu.Lock()
	g.adds.running = true
	g.adds.mu.Unlock()
	for ep := range g.All() {
		ep.Prober.Begin()
	}
}

// SeqSlots is how many sequences an endpoint runs at once: its
// max_num_seqs, the group's, or vLLM's default.
func (g *VLLMGroup) SeqSlots(ep *Endpoint) int {
	switch {
	case ep.MaxNumSeqs > 0:
		return ep.MaxNumSeqs
	case g.Settings.maxNumSeqs > 0:
		return g.Settings.maxNumSeqs
	}
	return defaultAssumedSeqs
}
