// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"math/rand/v2"
	"sync/atomic"
)

// EndpointBase is each endpoint's weight in its group's scheduler: the
// scheduler's weights read as percentages of a whole endpoint.
const EndpointBase = 100

// EndpointScore is an endpoint's health-score scheduling in its vllm
// group: the share of a whole endpoint it serves at, in hundredths of
// EndpointBase (0: out), which the scheduler sets, and the scheduler's
// member of it, which attempts' outcomes go to.
type EndpointScore struct {
	Fine   atomic.Int64
	Member any // the scheduler's own
}

// Share returns the endpoint's share of a whole endpoint: 0 when it is
// out, below 1 while it ramps back.
func (es *EndpointScore) Share() float64 {
	return min(1, float64(es.Fine.Load())/(EndpointBase*100))
}

// Admits draws whether an endpoint ramping back takes this request: with
// the probability of its share (always at a whole share).
func (es *EndpointScore) Admits() bool {
	f := es.Share()
	return f >= 1 || rand.Float64() < f
}
