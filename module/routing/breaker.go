// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"context"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

// BreakerConfig is a group's circuit breaker (see package breaker).
type BreakerConfig = breaker.Config

// breakerObserver settles the breakers of an attempt's group and
// endpoint with its verdict.
type breakerObserver struct {
	clock  clock.Clock
	logger *zap.Logger
}

func (breakerObserver) AttemptBegan(ctx context.Context, _ *AttemptRecord) context.Context {
	return ctx
}

func (b breakerObserver) AttemptEnded(a *AttemptRecord) {
	b.settle(a.Target, &a.Result, a.Slot, a.Turn)
}

// settleOne feeds one verdict to a breaker and logs what it did: opened
// (again) or closed by its half-open trial.
func (o breakerObserver) settleOne(b *breaker.Breaker, bc *BreakerConfig, v breaker.Verdict, group, endpoint string) {
	t := o.clock.Now()
	change := b.Settle(bc, v, t)
	if change == breaker.Kept {
		return
	}
	fields := []zap.Field{zap.String("group", group)}
	if endpoint != "" {
		fields = append(fields, zap.String("endpoint", endpoint))
	}
	if change == breaker.Closed {
		o.logger.Info("breaker closed: the half-open trial succeeded", fields...)
		return
	}
	_, until, _ := b.View(t)
	o.logger.Warn("breaker open", append(fields, zap.Time("until", until), zap.Bool("half_open_trial_failed", change == breaker.Reopened))...)
}

// ConnFailure reports whether a failure reason means the upstream could
// not be reached at all.
func ConnFailure(why Reason) bool {
	switch why {
	case because.ConnRefused, because.Dial:
		return true
	}
	return false
}

// settle feeds an attempt's verdict to the breakers. The endpoint's
// breaker takes every verdict on its endpoint, except a 429 that asked
// for a wait (the hold keeps the endpoint out instead). The group's
// breaker takes a failure only when the group as a whole fails: an
// attempt on no known endpoint (an openai group, an unprobed upstream),
// or a request whose failures on this target span two endpoints or more
// (the retries before this attempt and the proxy's own retries within
// it). One bad replica thus opens its own breaker and leaves the others
// serving; a group whose endpoints are all out is skipped for that.
// The attempt carrying the group's half-open trial settles it; a failure
// that is the endpoint's alone gives the trial to the next request.
func (o breakerObserver) settle(t *Target, res *AttemptResult, slot *upstream.Slot, turn AttemptTurn) {
	bc, v := t.Upstream.Breaker, res.Verdict
	if ep := res.Endpoint; ep != nil {
		ev := v
		if res.Held {
			ev = VerdictNone
		}
		o.settleOne(ep.Breaker, bc, breaker.Verdict{Outcome: ev, Trial: slot.Trial, Cause: res.Cause}, t.Group, ep.Dial)
		if v == VerdictFailure && len(turn.Avoid)+slot.Failed < 1 {
			v = VerdictNone
		}
	}
	if res.Held {
		v = VerdictNone // busy, not broken
	}
	if turn.GroupTrial || v != VerdictNone {
		o.settleOne(&t.Upstream.Shared.Breaker, bc, breaker.Verdict{Outcome: v, Trial: turn.GroupTrial}, t.Group, "")
	}
}
