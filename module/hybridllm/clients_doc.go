// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
)

// clientsDoc describes the clients in force (cr: none when nil) of
// gateway gw, whose books are m, at t.
func clientsDoc(gw string, m *money.Money, cr *clients.Callers, t time.Time) adminapi.ClientsDoc {
	doc := adminapi.ClientsDoc{Gateway: gw, Clients: []adminapi.ClientState{}}
	if c := m.Cap; c != nil {
		doc.DailyCapUSD = c.DailyUSD
	}
	if m.Spend != nil {
		total, _ := m.Spend.Spent("", t)
		doc.CloudUSDToday = total.DayUSD
		doc.SpendUnknown = m.Spend.Unknown()
	}
	if cr == nil {
		return doc
	}
	cs := cr.InForce()
	for _, name := range cs.Names() {
		c := cs.Named(name)
		st := adminapi.ClientState{Name: name, Trusted: c.Trusted, RPM: c.RPM, TPM: c.TPM, MaxTokens: c.Ceilings.MaxTokens, MaxN: c.Ceilings.MaxN,
			BudgetDayUSD: c.BudgetDay, BudgetMonthUSD: c.BudgetMonth}
		for _, a := range sortedKeys(c.Aliases) {
			st.Aliases = append(st.Aliases, a)
		}
		if c.Usage != nil {
			rpm, tpm := c.Limits()
			w := max(c.Usage.Tokens.Wait(tpm, t), c.Usage.Requests.Wait(rpm, t))
			st.WaitSeconds = w.Seconds()
		}
		if m.Spend != nil {
			_, s := m.Spend.Spent(name, t)
			st.CloudUSDToday, st.CloudUSDThisMonth = s.DayUSD, s.MonthUSD
		}
		if c.BudgetDay > 0 || c.BudgetMonth > 0 {
			left := -1.0
			if c.BudgetDay > 0 {
				left = max(0, c.BudgetDay-st.CloudUSDToday)
			}
			if c.BudgetMonth > 0 {
				if m := max(0, c.BudgetMonth-st.CloudUSDThisMonth); left < 0 || m < left {
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
	out := []adminapi.ClientsDoc{}
	t := clock.Process.Now()
	for _, g := range gws {
		out = append(out, clientsDoc(g.Name, &g.money, g.in.Callers, t))
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(adminapi.ClientsList{Gateways: out})
}
