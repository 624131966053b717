// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package breaker

import "time"

// Outcome is what an attempt says about its upstream.
type Outcome int8

// Outcomes of an attempt.
const (
	None    Outcome = iota // no evidence either way (client left, skipped)
	Success                // the upstream answered
	Failure                // the upstream failed
)

// Verdict is one attempt's evidence for one breaker.
type Verdict struct {
	Outcome Outcome
	// The attempt was the breaker's half-open trial.
	Trial bool
	// Of a failure: what the breaker keeps of it.
	Cause Cause
}

// Change is what a verdict did to a breaker.
type Change int8

// Changes of a breaker.
const (
	Kept     Change = iota // nothing that needs telling
	Opened                 // failures within the window opened it
	Reopened               // its half-open trial failed
	Closed                 // its half-open trial succeeded
)

// Settle feeds a verdict at time t to the breaker and reports what it did.
// On the half-open trial, a success closes the breaker, a failure opens
// it again and no outcome gives the trial to the next request; on any
// other request only a failure counts.
func (b *Breaker) Settle(cfg *Config, v Verdict, t time.Time) Change {
	switch {
	case v.Trial && v.Outcome == Success:
		b.TrialSucceeded()
		return Closed
	case v.Trial && v.Outcome == Failure:
		b.TrialFailed(cfg, t, v.Cause)
		return Reopened
	case v.Trial:
		b.ReleaseTrial()
	case v.Outcome == Failure && b.Failure(cfg, t, v.Cause):
		return Opened
	}
	return Kept
}
