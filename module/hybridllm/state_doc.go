// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"math"
	"slices"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
)

func breakerState(b *breaker.Breaker, t time.Time) *adminapi.BreakerState {
	st, until, trial := b.View(t)
	bs := &adminapi.BreakerState{State: st, Trial: trial, Opened: b.Opened()}
	if !until.IsZero() {
		bs.OpenUntil = &until
	}
	return bs
}

// heldUntil is the end of a 429's hold, if it is after t.
func heldUntil(b *breaker.Breaker, t time.Time) *time.Time {
	if until, ok := b.HeldUntil(t); ok {
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

// state renders the current state of all live gateways.
func state() adminapi.StateDoc { return stateOf(liveGateways()) }

// stateOf describes the given gateways.
func stateOf(gws []*Gateway) adminapi.StateDoc {
	doc := adminapi.StateDoc{Gateways: []adminapi.GatewayState{}}
	t := clock.Process.Now()
	for _, g := range gws {
		gs := adminapi.GatewayState{Name: g.Name, Aliases: []adminapi.AliasState{}, Groups: []adminapi.GroupState{}, Registry: g.reg.State()}
		for _, name := range sortedKeys(g.in.Aliases) {
			as := adminapi.AliasState{Name: name}
			al := g.in.Aliases[name]
			for i, tg := range al.Targets {
				ts := adminapi.TargetState{Group: tg.Group, Model: tg.Model,
					TimeoutSeconds: tg.Run.Timeout.Seconds(), FirstByteTimeoutSeconds: tg.Run.FirstByte.Seconds(),
					IdleTimeoutSeconds: tg.Run.Idle.Seconds(), Retries: tg.Run.Retries}
				if ws := al.SetAt(i); ws != nil {
					// the weight served now, in the config's units
					fine := ws.Rotation.Weight(i - ws.Start)
					cur, conf := int(math.Round(float64(fine)/100)), ws.Configured[i-ws.Start]
					if fine > 0 {
						cur = max(cur, 1) // it takes requests
					}
					ts.Set, ts.Weight, ts.ConfiguredWeight, ts.Strategy = ws.Name, &cur, &conf, ws.Strategy
					if tg.Seen.Health != nil {
						var w int
						ts.Health, w = tg.Seen.Health.State()
						if ws.Strategy == "" {
							cur = w // the scheduler's own rounding
						}
					}
				}
				if tc := tg.Tier; tc != nil {
					// the config's own fields, as they are
					ts.Tier = (*adminapi.TierState)(tc)
				}
				as.Targets = append(as.Targets, ts)
			}
			if c := al.Chain; c != nil {
				as.Degrade = c.State(t)
			}
			gs.Aliases = append(gs.Aliases, as)
		}
		for _, name := range sortedKeys(g.Groups) {
			gs.Groups = append(gs.Groups, groupState(g.Groups[name], t))
		}
		doc.Gateways = append(doc.Gateways, gs)
	}
	return doc
}

// groupState is the admin state of group grp at t.
func groupState(grp *Group, t time.Time) adminapi.GroupState {
	gs := adminapi.GroupState{Name: grp.Run.Name, Kind: grp.Kind, MaxNumSeqs: grp.MaxNumSeqs, MaxQueue: grp.MaxQueue,
		Models: slices.Clone(grp.Run.Expect), Drained: grp.Shared != nil && grp.Shared.Drained.Load()}
	if gs.Models == nil {
		gs.Models = []string{}
	}
	if vg := grp.VLLM; vg != nil {
		for _, dial := range sortedKeys(vg.Endpoints) {
			gs.Endpoints = append(gs.Endpoints, endpointState(vg, vg.Endpoints[dial], grp.Run.Expect, t))
		}
		if c := vg.Classes(); c != nil {
			gs.Classes = &adminapi.ClassesState{Priority: c.Priority, Queued: c.Queue.Len(), QueueSize: c.Queue.Size(),
				Shares: map[string]float64{}}
			for _, cls := range priority.Classes {
				gs.Classes.Shares[cls.String()] = c.Share(cls)
			}
		}
		if a := vg.Added.Load(); a != nil {
			for _, ep := range a.Endpoints {
				es := endpointState(vg, ep, grp.Run.Expect, t)
				es.Added = true
				gs.Endpoints = append(gs.Endpoints, es)
			}
		}
	}
	if oc := grp.Overflow; oc != nil && grp.VLLM != nil && grp.Shared != nil {
		active, since, why, transitions := grp.Shared.Overflow.View()
		sig := grp.VLLM.Signals(t)
		os := &adminapi.OverflowState{Active: active, Reason: why, Transitions: transitions,
			Waiting: optional(sig.Waiting), TTFTP99: optional(sig.TTFTP99), KVUsage: optional(sig.KV), InFlight: sig.InFlight}
		if !since.IsZero() {
			os.Since = &since
		}
		gs.Overflow = os
	}
	if grp.Breaker != nil && grp.Shared != nil {
		gs.Breaker = breakerState(&grp.Shared.Breaker, t)
	}
	if grp.Shared != nil && grp.VLLM == nil {
		gs.RateLimitedUntil = heldUntil(&grp.Shared.Breaker, t)
	}
	if grp.Cloud() && !grp.Run.CheckOff && len(grp.Run.Expect) > 0 {
		at, missing, errText := grp.Check.Result()
		mc := &adminapi.ModelCheckState{Missing: missing, Error: errText}
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

// endpointState is the admin state at t of endpoint ep of vLLM group vg,
// whose aliases send it the model names expect.
func endpointState(vg *upstream.VLLMGroup, ep *upstream.Endpoint, expect []string, t time.Time) adminapi.EndpointState {
	snap := ep.Prober.Snapshot()
	es := adminapi.EndpointState{
		Address: ep.Dial,
		Probed: adminapi.Probed{
			Health:        [...]string{"unknown", "up", "down"}[snap.Health],
			HealthError:   snap.HealthErr,
			Misconfigured: []string{},
			ServedModels:  snap.Models,
			ModelsError:   snap.ModelsErr,
		},
		InFlight: ep.Prober.Inflight.Load(),
		RedLine:  vg.RedLine(ep),
		Weight:   ep.WeightNow(),
	}
	if ep.Breaker != nil {
		es.RateLimitedUntil = heldUntil(ep.Breaker, t)
	}
	if vg.Settings.Breakers && ep.Breaker != nil {
		es.Breaker = breakerState(ep.Breaker, t)
	}
	es.Drained = ep.Drained != nil && ep.Drained.Load()
	if sc := ep.Score; sc != nil {
		pct := int(math.Round(sc.Share() * 100))
		es.HealthScore, _ = sc.Member.(*routing.HealthMember).State()
		es.ServePercent = &pct
	}
	if snap.Models != nil {
		for _, m := range expect {
			if _, ok := snap.Models[m]; !ok {
				es.Misconfigured = append(es.Misconfigured, m)
			}
		}
	}
	ms := adminapi.MetricsState{Error: snap.MetricsErr}
	if !snap.MetricsAt.IsZero() {
		age := t.Sub(snap.MetricsAt).Seconds()
		ms.AgeSeconds = &age
		ms.Fresh = t.Sub(snap.MetricsAt) <= vg.Settings.StaleAfter
		var waiting, running, kv, queries, hits float64
		kvSeen := false
		for _, l := range snap.Loads {
			waiting += l.Waiting
			running += l.Running
			queries, hits = queries+l.PrefixQueries, hits+l.PrefixHits
			if !math.IsNaN(l.KVUsage) {
				kv = max(kv, l.KVUsage)
				kvSeen = true
			}
		}
		ms.Waiting, ms.Running = waiting, running
		if kvSeen {
			ms.KVCacheUsage = &kv
		}
		if queries > 0 {
			rate := min(hits/queries, 1)
			ms.PrefixCacheHitRate = &rate
		}
	}
	if !math.IsNaN(snap.TTFTP50) {
		p50, p99 := snap.TTFTP50, snap.TTFTP99
		ms.TTFTP50Seconds, ms.TTFTP99Seconds = &p50, &p99
	}
	es.Metrics = ms
	return es
}
