// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// SetConfig holds the settings of a weighted set as a whole.
type SetConfig struct {
	// How the set leans within its weights: `weighted` (the weights
	// alone), `latency` (towards the member with the lowest recent time
	// to first byte) or `cost` (towards the cheapest member by its
	// group's cost block). A leaning scales each member's weight by how
	// it compares with the best member: the best keeps its weight, the
	// others get their weight times best/theirs, never under a tenth of
	// it, so that every member with a weight keeps some traffic (and,
	// for latency, fresh figures). A weight of 0 stays 0. Default:
	// `weighted`.
	Strategy string `json:"strategy,omitempty"`
}

// Strategies.
const (
	StrategyWeighted = "weighted"
	StrategyLatency  = "latency"
	StrategyCost     = "cost"
)

// minLean is the smallest share of its weight a strategy leaves a member.
const minLean = 0.1

// latencyMinSamples is how many answers a member needs in its window
// before the latency strategy judges it.
const latencyMinSamples = 5

// latencyWindow is the span over which the latency strategy compares
// the members' times to first byte.
const latencyWindow = 30 * time.Second

// memberLatency is a member's recent times to first byte, for the
// latency strategy.
type memberLatency struct {
	mu sync.Mutex
	w  *healthscore.Window
}

func (ml *memberLatency) add(t time.Time, d time.Duration) {
	ml.mu.Lock()
	ml.w.Add(t, false, d)
	ml.mu.Unlock()
}

func (ml *memberLatency) p50(t time.Time) (time.Duration, bool) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	st := ml.w.Stats(t)
	return st.P50, st.Requests >= latencyMinSamples
}

// provisionStrategy sets up the set's leaning, from its config; logger
// warns of what it cannot lean by.
func provisionStrategy(al *Alias, ws *WeightedSet, logger *zap.Logger) error {
	sc := al.Sets[ws.Name]
	if sc == nil || sc.Strategy == "" || sc.Strategy == StrategyWeighted {
		return nil
	}
	members := al.Targets[ws.Start:ws.End]
	ws.Strategy = sc.Strategy
	ws.lean = make([]float64, len(members))
	for i := range ws.lean {
		ws.lean[i] = 1
	}
	switch sc.Strategy {
	case StrategyLatency:
		for _, t := range members {
			t.Seen.latency = &memberLatency{w: healthscore.NewWindow(latencyWindow)}
		}
		ws.members = members
	case StrategyCost:
		prices := make([]float64, len(members))
		for i, t := range members {
			prices[i] = math.NaN() // unknown
			switch cc := t.Upstream.Cost; {
			case cc == nil:
				logger.Warn("a member of a set with strategy cost has no cost block; it is not weighed by price",
					zap.String("alias", al.Name), zap.String("set", ws.Name), zap.String("group", t.Group))
			case t.Upstream.Kind == upstream.KindVLLM:
				prices[i] = 0 // its GPUs are paid for: a token more costs nothing
			case cc.PerSecond > 0:
				logger.Warn("a member of a set with strategy cost is priced per second; it is not weighed by price",
					zap.String("alias", al.Name), zap.String("set", ws.Name), zap.String("group", t.Group))
			default:
				prices[i] = cc.InputPerMillion + cc.OutputPerMillion
			}
		}
		ws.lean = leanTowardsLowest(prices)
	default:
		return fmt.Errorf("set %q: unknown strategy %q: want weighted, latency or cost", ws.Name, sc.Strategy)
	}
	return nil
}

// leanTowardsLowest returns each member's share of its weight when the
// lowest value is best: best/value, at least minLean; a member whose
// value is unknown (NaN) keeps its whole weight.
func leanTowardsLowest(values []float64) []float64 {
	best := math.Inf(1)
	for _, v := range values {
		if !math.IsNaN(v) {
			best = min(best, v)
		}
	}
	out := make([]float64, len(values))
	for i, v := range values {
		switch {
		case math.IsNaN(v) || v <= best:
			out[i] = 1
		default:
			out[i] = max(minLean, best/v)
		}
	}
	return out
}

// relean recomputes a latency set's leaning from its members' recent
// times to first byte, and serves the weights it gives.
func (ws *WeightedSet) relean(t time.Time) {
	values := make([]float64, len(ws.members))
	for i, m := range ws.members {
		values[i] = math.NaN()
		if p50, ok := m.Seen.latency.p50(t); ok {
			values[i] = float64(p50)
		}
	}
	lean := leanTowardsLowest(values)
	if hs := ws.health; hs != nil {
		hs.mu.Lock()
		ws.lean = lean
		hs.Apply()
		hs.mu.Unlock()
		return
	}
	ws.mu.Lock()
	ws.lean = lean
	ws.serveLocked()
	ws.mu.Unlock()
}
