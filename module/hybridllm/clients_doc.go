// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
)

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

// clientsDoc describes the gateway's clients in force.
func (g *Gateway) clientsDoc(t time.Time) ClientsDoc {
	doc := ClientsDoc{Gateway: g.Name, Clients: []ClientState{}}
	if c := g.CloudSpend; c != nil {
		doc.DailyCapUSD = c.DailyUSD
	}
	if g.spend != nil {
		total, _ := g.spend.spent("", t)
		doc.CloudUSDToday = total.DayUSD
		doc.SpendUnknown = g.spend.unknown.Load()
	}
	if g.clientSet == nil {
		return doc
	}
	cs := g.clientSet.Load()
	for _, name := range cs.names() {
		c := cs.byName[name]
		st := ClientState{Name: name, Trusted: c.trusted, RPM: c.rpm, TPM: c.tpm, MaxTokens: c.maxTokens, MaxN: c.maxN,
			BudgetDayUSD: c.budgetDay, BudgetMonthUSD: c.budgetMonth}
		for _, a := range sortedKeys(c.aliases) {
			st.Aliases = append(st.Aliases, a)
		}
		if c.usage != nil {
			rpm, tpm := c.limits()
			w := max(c.usage.tokens.Wait(tpm, t), c.usage.requests.Wait(rpm, t))
			st.WaitSeconds = w.Seconds()
		}
		if g.spend != nil {
			_, s := g.spend.spent(name, t)
			st.CloudUSDToday, st.CloudUSDThisMonth = s.DayUSD, s.MonthUSD
		}
		if c.budgetDay > 0 || c.budgetMonth > 0 {
			left := -1.0
			if c.budgetDay > 0 {
				left = max(0, c.budgetDay-st.CloudUSDToday)
			}
			if c.budgetMonth > 0 {
				if m := max(0, c.budgetMonth-st.CloudUSDThisMonth); left < 0 || m < left {
					left = m
				}
			}
			st.BudgetLeftUSD = &left
		}
		doc.Clients = append(doc.Clients, st)
	}
	return doc
}

// serveClients answers GET /hybrid_llm/clients[?gateway=name].
func serveClients(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	gws, err := gatewaysNamed(r.URL.Query().Get("gateway"))
	if err != nil {
		return err
	}
	out := []ClientsDoc{}
	t := provisionClock.Now()
	for _, g := range gws {
		out = append(out, g.clientsDoc(t))
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"gateways": out})
}
