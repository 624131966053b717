// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package money

import (
	"time"

	"go.uber.org/zap"

	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
)

// spendUnknownRetry is the Retry-After of a request refused the cloud
// while the spend is unknown: an operator's decision has no set time.
const spendUnknownRetry = 5 * time.Minute

// CloudClosed returns why cloud targets are closed to a request now (the
// gateway's daily spend cap is reached, or the client's budget is spent),
// and until when.
func (m *Money) CloudClosed(cl *clients.Caller, t time.Time) (because.Reason, time.Duration) {
	capped := m.Cap != nil && m.Cap.DailyUSD > 0
	if m.Spend == nil || !capped && (cl == nil || cl.BudgetMonth <= 0 && cl.BudgetDay <= 0) {
		return "", 0 // nothing to check the spend against
	}
	if m.Spend.Unknown() != nil {
		return because.SpendUnknown, spendUnknownRetry
	}
	name := ""
	if cl != nil {
		name = cl.Name
	}
	total, s := m.Spend.Spent(name, t)
	if capped && total.DayUSD >= m.Cap.DailyUSD {
		return because.SpendCap, untilTomorrow(t)
	}
	if cl == nil {
		return "", 0
	}
	if cl.BudgetMonth > 0 && s.MonthUSD >= cl.BudgetMonth {
		return because.Budget, untilNextMonth(t)
	}
	if cl.BudgetDay > 0 && s.DayUSD >= cl.BudgetDay {
		return because.Budget, untilTomorrow(t)
	}
	return "", 0
}

// spent records a request's cloud spend, and warns once a day when the
// gateway's spend passes the cap's warning share.
func (m *Money) spent(cl *clients.Caller, usd float64, t time.Time) {
	if m.Spend == nil || usd <= 0 {
		return
	}
	name := ""
	if cl != nil {
		name = cl.Name
	}
	if cl != nil && !cl.Known {
		name = "" // an identity's name, unbounded: counted in the total only
	}
	m.Spend.Add(name, usd, t)
	c := m.Cap
	if c == nil || c.DailyUSD <= 0 {
		return
	}
	total, _ := m.Spend.Spent("", t)
	share := c.warnShare()
	if total.DayUSD >= share*c.DailyUSD && m.Spend.WarnOnce(total.Day) {
		m.Logger.Warn("cloud spend near the daily cap",
			zap.Float64("spent_usd", total.DayUSD), zap.Float64("daily_cap_usd", c.DailyUSD), zap.Float64("warn_share", share))
	}
}

// CloudSpend caps what all the gateway's cloud targets together may cost
// in a UTC day.
type CloudSpend struct {
	// The daily cap in USD. When it is reached, overflow and fallback to
	// cloud targets stop until the next UTC day: self-hosted targets keep
	// serving, and a request that finds no target gets 503 with
	// Retry-After.
	DailyUSD float64 `json:"daily_usd,omitempty"`

	// The share of the cap at which a warning is logged. Default: 0.8.
	WarnAt float64 `json:"warn_at,omitempty"`
}

func (c *CloudSpend) warnShare() float64 {
	if c.WarnAt > 0 {
		return c.WarnAt
	}
	return 0.8
}

// untilNextMonth is the time left in the UTC month.
func untilNextMonth(t time.Time) time.Duration {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(t)
}

// untilTomorrow is the time left in the UTC day.
func untilTomorrow(t time.Time) time.Duration {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC).Sub(t)
}
