// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
)

// WeightedSet is a run of an alias's targets served active-active by
// weight: each request starts at the member smooth weighted round robin
// picks, and falls back to the others, by weight, before the targets
// after the set. A member of weight 0 gets no request.
type WeightedSet struct {
	Name       string
	Start, End int        // the members: al.Targets[Start:End]
	byWeight   []int      // the members, heaviest first
	Configured []int      // the members' weights in the config
	Rotation   *swrr      // in hundredths of a weight
	health     *SetHealth // its scheduler, when its members are watched
	Strategy   string     // its leaning, if any (see SetConfig)
	members    []*Target  // with strategy latency

	// without health: the weights served when healthy (configured, or
	// set by hand), and the strategy's share of each (nil: whole); with
	// health, lean is guarded by the scheduler's lock
	mu   sync.Mutex
	base []int
	lean []float64
}

// leaned returns weight w of member i (in hundredths) as the strategy
// leans it; a member with a weight keeps at least 1.
func (ws *WeightedSet) leaned(i, w int) int {
	if ws.lean == nil || w == 0 {
		return w
	}
	return max(1, int(math.Round(float64(w)*ws.lean[i])))
}

// serveLocked hands the base weights, leaned, to the round robin, if
// they changed. ws.mu is held.
func (ws *WeightedSet) serveLocked() {
	w := make([]int, len(ws.base))
	same := true
	for i, b := range ws.base {
		w[i] = ws.leaned(i, b*100)
		same = same && ws.Rotation.Weight(i) == w[i]
	}
	if !same {
		ws.Rotation.setAll(w)
	}
}

// swrr is a smooth weighted round robin (as nginx's upstream module
// does): over any run of picks each member's share follows its weight,
// without bursts to one member.
type swrr struct {
	mu      sync.Mutex
	weights []int
	current []int
}

func newSWRR(weights []int) *swrr {
	return &swrr{weights: weights, current: make([]int, len(weights))}
}

// setAll changes every member's weight. The rotation goes on from where
// it is (a member put at 0 leaves it): starting afresh would hand the
// next pick to the heaviest member each time, and weights that move often
// (a strategy, a ramp) would starve the lighter ones.
func (s *swrr) setAll(w []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(s.weights, w)
	for i, v := range w {
		if v <= 0 {
			s.current[i] = 0
		}
	}
}

// Weight returns a member's weight now.
func (s *swrr) Weight(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.weights[i]
}

// next returns the index of the next member, or -1 when every weight is
// 0.
func (s *swrr) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	best, total := -1, 0
	for i, w := range s.weights {
		if w <= 0 {
			continue
		}
		s.current[i] += w
		total += w
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	if best >= 0 {
		s.current[best] -= total
	}
	return best
}

// order appends the set's members for one request to plan: the picked
// one first, then the others with a weight, heaviest first.
func (ws *WeightedSet) order(plan []*Target, members []*Target) []*Target {
	first := ws.Rotation.next()
	if first < 0 {
		return plan // no member takes new requests
	}
	plan = append(plan, members[first])
	ws.Rotation.mu.Lock()
	for _, i := range ws.byWeight {
		if i != first && ws.Rotation.weights[i] > 0 {
			plan = append(plan, members[i])
		}
	}
	ws.Rotation.mu.Unlock()
	return plan
}

// Weights set through the admin API, by gateway, alias, set and member
// group, for the life of the process. Each remembers the configured
// weight it replaced: a reload keeps it while the config's weight is
// unchanged, and a config that changes the weight wins.
var weightOverrides = reload.NewPool[*atomic.Pointer[weightOverride]]()

type weightOverride struct{ configured, weight int }

// weightOverrideOf is the member's override: nil in it when none is set.
func weightOverrideOf(gw, alias, set, group string) *atomic.Pointer[weightOverride] {
	return weightOverrides.Keep(reload.Key(gw, alias, set, group), func() *atomic.Pointer[weightOverride] {
		return new(atomic.Pointer[weightOverride])
	})
}

// HasMember reports whether a weighted set of the alias has the group.
func (al *Alias) HasMember(group string) bool {
	for _, ws := range al.WeightedSets {
		for _, t := range al.Targets[ws.Start:ws.End] {
			if t.Group == group {
				return true
			}
		}
	}
	return false
}

// SetWeight sets the weight of the members of the alias's sets in a
// group, for this config of gateway gw and the reloads that keep its weight; it reports
// false when the group is in no set of the alias.
func (al *Alias) SetWeight(gw, group string, w int) bool {
	found := false
	for _, ws := range al.WeightedSets {
		for i, t := range al.Targets[ws.Start:ws.End] {
			if t.Group == group {
				if ws.health != nil {
					ws.health.setBase(i, w) // the scheduler moves weights from here
				} else {
					ws.mu.Lock()
					ws.base[i] = w
					ws.serveLocked()
					ws.mu.Unlock()
				}
				weightOverrideOf(gw, al.Name, ws.Name, group).Store(&weightOverride{configured: ws.Configured[i], weight: w})
				found = true
			}
		}
	}
	return found
}

// provisionSets finds the alias's weighted sets: runs of targets with the
// same set name. A weight set through the admin API is kept while the
// config's weight for the member is the one it replaced.
func (al *Alias) provisionSets(gw string) error {
	al.WeightedSets = nil
	for i := 0; i < len(al.Targets); {
		t := al.Targets[i]
		if t.Set == "" {
			if t.Weight != nil || t.Health != nil {
				return fmt.Errorf("target %d (group %q): a weight or health outside a weighted set", i, t.Group)
			}
			i++
			continue
		}
		j := i
		var weights []int
		for j < len(al.Targets) && al.Targets[j].Set == t.Set {
			for _, o := range al.Targets[i:j] {
				if o.Group == al.Targets[j].Group && o.Model == al.Targets[j].Model {
					return fmt.Errorf("set %q: group %q with model %q twice", t.Set, o.Group, o.Model)
				}
			}
			w := 1
			if tw := al.Targets[j].Weight; tw != nil {
				if *tw < 0 {
					return fmt.Errorf("set %q: target %d (group %q): a weight must not be negative", t.Set, j, al.Targets[j].Group)
				}
				w = *tw
			}
			weights = append(weights, w)
			j++
		}
		for _, other := range al.WeightedSets {
			if other.Name == t.Set {
				return fmt.Errorf("set %q: its targets must be next to each other", t.Set)
			}
		}
		configured := slices.Clone(weights)
		for k, m := range al.Targets[i:j] {
			slot := weightOverrideOf(gw, al.Name, t.Set, m.Group)
			if ov := slot.Load(); ov != nil {
				if ov.configured == configured[k] {
					weights[k] = ov.weight
				} else {
					slot.CompareAndSwap(ov, nil) // the config changed it
				}
			}
		}
		byWeight := make([]int, len(weights))
		for k := range byWeight {
			byWeight[k] = k
		}
		slices.SortStableFunc(byWeight, func(a, b int) int { return configured[b] - configured[a] })
		fine := make([]int, len(weights))
		for k, w := range weights {
			fine[k] = w * 100
		}
		al.WeightedSets = append(al.WeightedSets, &WeightedSet{Name: t.Set, Start: i, End: j, byWeight: byWeight, Configured: configured,
			base: weights, Rotation: newSWRR(fine)})
		i = j
	}
	return nil
}

// Ordered returns the targets of plan (a tail of al.Targets) for one
// request: a weighted set's members in this request's order. buf holds
// the result when it fits.
func (al *Alias) Ordered(plan []*Target, buf []*Target) []*Target {
	if len(al.WeightedSets) == 0 {
		return plan
	}
	offset := len(al.Targets) - len(plan) // where plan starts in al.Targets
	out := buf[:0]
	for i := offset; i < len(al.Targets); {
		ws := al.SetAt(i)
		if ws == nil {
			out = append(out, al.Targets[i])
			i++
			continue
		}
		out = ws.order(out, al.Targets[ws.Start:ws.End])
		i = ws.End
	}
	return out
}

// SetAt returns the weighted set target i belongs to, if any.
func (al *Alias) SetAt(i int) *WeightedSet {
	for _, ws := range al.WeightedSets {
		if i >= ws.Start && i < ws.End {
			return ws
		}
	}
	return nil
}
