// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"context"
	"time"
)

// The ledger's demand is integrated from the attempts themselves: each
// occupies its share of the GPUs from its start to its end, so that every
// request counts, however short (a sampler that looks once a second
// misses a 100 ms request).

// provisionOccupancy sets each group's share of the GPUs per request in
// flight: for a vllm group with a cost model, its GPUs divided by its
// sequence slots; for an openai group, the same share of the self-hosted
// GPUs (a cloud request in flight is counted as one slot of them). Without
// self-hosted GPUs in the cost model there is no comparison to make, and
// nothing is counted.
func (g *Gateway) provisionOccupancy() {
	var gpus, slots float64
	for _, name := range sortedKeys(g.Groups) {
		grp := g.Groups[name]
		if vg := grp.vllm; vg != nil && grp.Cost != nil && grp.Cost.GPUs > 0 && len(vg.endpoints) > 0 {
			n := 0.0
			for _, ep := range vg.endpoints {
				n += float64(vg.seqSlots(ep))
			}
			grp.occupancy = grp.Cost.GPUs / n
			gpus += grp.Cost.GPUs
			slots += n
		}
	}
	if slots == 0 {
		return
	}
	g.cloudSlotGPUs, g.selfGPUs = gpus/slots, gpus
	for _, grp := range g.Groups {
		if grp.Kind == KindOpenAI {
			grp.occupancy = g.cloudSlotGPUs
		}
	}
}

// seqSlots is how many sequences an endpoint runs at once: its
// max_num_seqs, the group's, or vLLM's default.
func (g *vllmGroup) seqSlots(ep *endpoint) int {
	switch {
	case ep.maxNumSeqs > 0:
		return ep.maxNumSeqs
	case g.maxNumSeqs > 0:
		return g.maxNumSeqs
	}
	return defaultAssumedSeqs
}

// occupancyObserver counts an attempt in the ledger's demand while it
// runs, failed or not (the GPUs were occupied): self and cloud GPU
// equivalents.
type occupancyObserver struct {
	ledger      *ledger
	self, cloud float64
}

// occupancyOf is the observer of attempts on t for the ledger, if its
// group occupies GPUs.
func occupancyOf(l *ledger, t *Target) (occupancyObserver, bool) {
	occ := t.group.occupancy
	if occ <= 0 || l == nil {
		return occupancyObserver{}, false
	}
	if t.group.Kind == KindOpenAI {
		return occupancyObserver{ledger: l, cloud: occ}, true
	}
	return occupancyObserver{ledger: l, self: occ}, true
}

func (o occupancyObserver) attemptBegan(ctx context.Context, _ *attemptRecord) context.Context {
	o.ledger.occupy(o.ledger.clock.Now(), o.self, o.cloud)
	return ctx
}

func (o occupancyObserver) attemptEnded(*attemptRecord) { o.ledger.release(o.self, o.cloud) }

// occupy changes the demand at t by dSelf and dCloud GPU equivalents,
// once the demand so far is integrated up to t.
func (l *ledger) occupy(t time.Time, dSelf, dCloud float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advanceLocked(t)
	// sums of many small shares drift: what is left under a millionth of
	// a GPU is nothing
	l.curSelf, l.curCloud = snapZero(l.curSelf+dSelf), snapZero(l.curCloud+dCloud)
	b := l.bucketLocked(l.lastAt)
	b.peak = max(b.peak, l.curSelf+l.curCloud)
}

// release ends what occupy began, now.
func (l *ledger) release(dSelf, dCloud float64) { l.occupy(l.clock.Now(), -dSelf, -dCloud) }

func snapZero(v float64) float64 {
	if v < 1e-6 {
		return 0
	}
	return v
}

// advanceLocked integrates the current demand from the last change (or
// tick) to t into the buckets it spans. l.mu is held.
func (l *ledger) advanceLocked(t time.Time) {
	if l.lastAt.IsZero() || t.Sub(l.lastAt) > ledgerBuckets*ledgerBucket {
		l.lastAt = t // the first look, or back after longer than the ledger holds
		return
	}
	for l.lastAt.Before(t) {
		b := l.bucketLocked(l.lastAt)
		end := b.start.Add(ledgerBucket)
		if end.After(t) {
			end = t
		}
		d := end.Sub(l.lastAt)
		secs := d.Seconds()
		busy := l.curSelf
		if l.selfGPUs > 0 {
			busy = min(busy, l.selfGPUs) // the rest waits in vLLM's queues
		}
		b.dur += d
		b.selfSecs += busy * secs
		// the cloud's demand; requests waiting in vLLM's queues are not:
		// their wait is latency, the work they need counts when they run
		b.cloudGS += l.curCloud * secs
		b.peak = max(b.peak, l.curSelf+l.curCloud)
		l.lastAt = end
	}
}
