// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package adminapi

import "time"

// ClientState is one client as GET /hybrid_llm/clients shows it: its
// settings, its use and what is left. It never holds a key.
type ClientState struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"` // empty: all
	Trusted bool     `json:"trusted"`

	RPM int `json:"rpm,omitempty"`
	TPM int `json:"tpm,omitempty"`
	// how long until a request would be let in, when the client is at a
	// limit now
	WaitSeconds float64 `json:"wait_seconds,omitempty"`

	MaxTokens int `json:"max_tokens,omitempty"`
	MaxN      int `json:"max_n,omitempty"`

	CloudUSDToday     float64  `json:"cloud_usd_today"`
	CloudUSDThisMonth float64  `json:"cloud_usd_this_month"`
	BudgetDayUSD      float64  `json:"budget_day_usd,omitempty"`
	BudgetMonthUSD    float64  `json:"budget_month_usd,omitempty"`
	BudgetLeftUSD     *float64 `json:"budget_left_usd,omitempty"` // the smaller of what is left today and this month
}

// ClientsDoc is a gateway's clients and its cloud spend.
type ClientsDoc struct {
	Gateway       string  `json:"gateway"`
	CloudUSDToday float64 `json:"cloud_usd_today"`
	DailyCapUSD   float64 `json:"daily_cap_usd,omitempty"`
	// set when the spend in storage could not be read: cloud targets are
	// closed to the clients with a budget, and to all under a daily cap,
	// until POST /hybrid_llm/spend/accept
	SpendUnknown *SpendUnknown `json:"spend_unknown,omitempty"`
	Clients      []ClientState `json:"clients"`
}

// SpendUnknown says why a gateway's cloud spend is not known.
type SpendUnknown struct {
	Since      time.Time `json:"since"`
	Why        string    `json:"why"`
	SetAsideAs string    `json:"set_aside_as,omitempty"`
}

// ClientsList is the answer of GET /hybrid_llm/clients: each gateway's
// clients.
type ClientsList struct {
	Gateways []ClientsDoc `json:"gateways"`
}
