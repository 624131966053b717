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

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves the gateway's state on Caddy's admin listener:
//
//	GET /hybrid_llm/state
//
// It holds nothing itself; it reads the live gateways' shared state.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.hybrid_llm",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/hybrid_llm/state", Handler: caddy.AdminHandlerFunc(serveState)},
		{Pattern: "/hybrid_llm/ledger", Handler: caddy.AdminHandlerFunc(serveLedger)},
	}
}

// serveLedger answers GET /hybrid_llm/ledger?gateway=<name>&window=<duration>
// with the three-way cost comparison of the window (default 1h, at most a
// day) for each gateway, or the one named.
func serveLedger(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	window := time.Hour
	if v := r.URL.Query().Get("window"); v != "" {
		d, err := caddy.ParseDuration(v)
		if err != nil || d <= 0 || d > 24*time.Hour {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("window must be a duration up to 24h, got %q", v)}
		}
		window = d
	}
	name := r.URL.Query().Get("gateway")
	type entry struct {
		Gateway string `json:"gateway"`
		Comparison
	}
	out := []entry{}
	for _, g := range liveGateways() {
		if name == "" || g.Name == name {
			out = append(out, entry{Gateway: g.Name, Comparison: g.comparison(window)})
		}
	}
	if name != "" && len(out) == 0 {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no gateway named %q", name)}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"window_seconds": window.Seconds(), "gateways": out})
}

func serveState(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(state())
}

// Interface guards
var _ caddy.AdminRouter = (*adminAPI)(nil)
