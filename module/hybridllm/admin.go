// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves the gateway's state on Caddy's admin listener:
//
//	GET /hybrid_llm/state
//	GET /hybrid_llm/ledger
//	GET /hybrid_llm/clients
//
// and changes it (POST, JSON: drain, undrain, weight, drill,
// spend/accept).
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

// Provision takes the admin address for this process: the admin endpoint
// provisions its routers just before it listens (see lockAdmin).
func (adminAPI) Provision(ctx caddy.Context) error { return lockAdmin(ctx) }

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: adminapi.PathState, Handler: caddy.AdminHandlerFunc(serveState)},
		{Pattern: adminapi.PathLedger, Handler: caddy.AdminHandlerFunc(serveLedger)},
		{Pattern: adminapi.PathClients, Handler: caddy.AdminHandlerFunc(serveClients)},
		{Pattern: adminapi.PathDrain, Handler: caddy.AdminHandlerFunc(serveDrain)},
		{Pattern: adminapi.PathUndrain, Handler: caddy.AdminHandlerFunc(serveUndrain)},
		{Pattern: adminapi.PathDrill, Handler: caddy.AdminHandlerFunc(serveDrill)},
		{Pattern: adminapi.PathSpendAccept, Handler: caddy.AdminHandlerFunc(serveSpendAccept)},
		{Pattern: adminapi.PathWeight, Handler: caddy.AdminHandlerFunc(serveWeight)},
		{Pattern: adminapi.PathRegistry, Handler: caddy.AdminHandlerFunc(serveRegistry)},
	}
}

// readAction checks a mutating request (POST, JSON) and finds its gateway.
// These routes change live routing: keep the admin listener on loopback.
func readAction(r *http.Request) (*adminapi.ActionRequest, *Gateway, error) {
	if r.Method != http.MethodPost {
		return nil, nil, caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use POST", r.Method)}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, nil, caddy.APIError{HTTPStatus: http.StatusUnsupportedMediaType, Err: fmt.Errorf("Content-Type must be application/json")}
	}
	var req adminapi.ActionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, nil, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("decoding request: %v", err)}
	}
	g, err := gatewayNamed(req.Gateway)
	if err != nil {
		return nil, nil, err
	}
	return &req, g, nil
}

// gatewayNamed finds a live gateway by name, or the only one when name is
// empty.
func gatewayNamed(name string) (*Gateway, error) {
	live := liveGateways()
	for _, g := range live {
		if g.Name == name || (name == "" && len(live) == 1) {
			return g, nil
		}
	}
	if name == "" {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound,
			Err: fmt.Errorf("%d gateways are running (%s): name one with \"gateway\"", len(live), gatewayNames(live))}
	}
	return nil, noGateway(name, live)
}

// gatewaysNamed returns the live gateways, or the one named.
func gatewaysNamed(name string) ([]*Gateway, error) {
	live := liveGateways()
	if name == "" {
		return live, nil
	}
	for _, g := range live {
		if g.Name == name {
			return []*Gateway{g}, nil
		}
	}
	return nil, noGateway(name, live)
}

// noGateway is the answer for a gateway name that is not running: 404,
// naming those that are.
func noGateway(name string, live []*Gateway) error {
	if len(live) == 0 {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no gateway named %q: no hybrid_llm gateway is running", name)}
	}
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no gateway named %q; running: %s", name, gatewayNames(live))}
}

func gatewayNames(live []*Gateway) string {
	names := make([]string, len(live))
	for i, g := range live {
		names[i] = g.Name
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// serveDrain drains a group or one endpoint of a vllm group: new
// requests skip it at once, requests in flight finish. The flag lives in
// shared state, so it survives config reloads until undone, and in
// Caddy's storage (or the registry), so it survives restarts.
func serveDrain(w http.ResponseWriter, r *http.Request) error {
	return setDrained(w, r, true)
}

// serveUndrain undoes serveDrain.
func serveUndrain(w http.ResponseWriter, r *http.Request) error {
	return setDrained(w, r, false)
}

// setDrained sets the drain flag the request names to drained, and
// answers with what it set.
func setDrained(w http.ResponseWriter, r *http.Request, drained bool) error {
	req, g, err := readAction(r)
	if err != nil {
		return err
	}
	if req.Group == "" {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(`name the group: {"group":"self"}, with "endpoint" for one endpoint of a %s group; the groups: %s`, KindVLLM, strings.Join(sortedKeys(g.Groups), ", "))}
	}
	grp := g.Groups[req.Group]
	if grp == nil || grp.Shared == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("gateway %q has no group %q; its groups: %s", g.Name, req.Group, strings.Join(sortedKeys(g.Groups), ", "))}
	}
	what := map[string]any{"gateway": g.Name, "group": req.Group, "drained": drained}
	var ep *upstream.Endpoint
	if req.Endpoint != "" {
		if grp.VLLM == nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("endpoints are drained one by one in groups of kind %s; drain group %q as a whole", KindVLLM, req.Group)}
		}
		if ep = grp.VLLM.Lookup(req.Endpoint); ep == nil {
			var dials []string
			for ep := range grp.VLLM.All() {
				dials = append(dials, ep.Dial)
			}
			slices.Sort(dials)
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("group %q has no endpoint %q; its endpoints: %s", req.Group, req.Endpoint, strings.Join(dials, ", "))}
		}
		what["endpoint"] = req.Endpoint
	}
	switch {
	case g.reg != nil:
		// the whole fleet drains: through the registry, applied here as
		// on every gateway by the watch
		rev, err := g.reg.Fleet.WriteDrain(r.Context(), req.Group, req.Endpoint, drained)
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf("nothing changed: %v", err)}
		}
		what["registry_revision"] = rev
		g.reg.Await(rev)
	case ep != nil:
		ep.Drained.Store(drained)
	default:
		grp.Shared.Drained.Store(drained)
	}
	if g.reg == nil && g.life.storage != nil {
		// kept for the next start (see drains.go)
		if err := saveDrains(r.Context(), g.life.storage, g.Name, g.Groups); err != nil {
			g.logger.Error("storing the drains; a restart would not keep this one", zap.Error(err))
			what["not_stored"] = err.Error()
		}
	}
	if !drained && ep == nil && grp.VLLM != nil {
		// a group's undrain leaves its endpoints' own drains as they are
		var still []string
		for ep := range grp.VLLM.All() {
			if ep.Drained != nil && ep.Drained.Load() {
				still = append(still, ep.Dial)
			}
		}
		if len(still) > 0 {
			slices.Sort(still)
			what["endpoints_still_drained"] = still
		}
	}
	verb := "undrained"
	if drained {
		verb = "drained"
	}
	g.logger.Warn(verb+" through the admin API", zap.String("group", req.Group), zap.String("endpoint", req.Endpoint))
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(what)
}

// serveSpendAccept accepts a gateway's cloud spend that could not be read
// from storage (see spendBookOf): it counts on from what is known, and
// cloud targets open again to the clients with a budget and under the
// spend cap.
func serveSpendAccept(w http.ResponseWriter, r *http.Request) error {
	_, g, err := readAction(r)
	if err != nil {
		return err
	}
	if g.money.Spend == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("gateway %q keeps no cloud spend (no clients, no cloud_spend)", g.Name)}
	}
	if !g.money.Spend.Stored() {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("gateway %q keeps its cloud spend in the registry, not in storage", g.Name)}
	}
	u := g.money.Spend.Accept()
	if err := g.money.Spend.Save(r.Context(), g.life.storage); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("accepted, but not saved, so a restart would close cloud again: %v", err)}
	}
	total, _ := g.money.Spend.Spent("", g.clock.Now())
	what := map[string]any{"gateway": g.Name, "was_unknown": u != nil, "cloud_usd_today": total.DayUSD}
	if u != nil {
		what["why"], what["set_aside_as"] = u.Why, u.SetAsideAs
		g.logger.Warn("cloud spend accepted through the admin API: counting on from what is known",
			zap.String("why", u.Why), zap.String("set_aside_as", u.SetAsideAs), zap.Float64("cloud_usd_today", total.DayUSD))
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(what)
}

// readAliasAction is readAction for the routes about one alias.
func readAliasAction(r *http.Request) (*adminapi.ActionRequest, *Gateway, *routing.Alias, error) {
	req, g, err := readAction(r)
	if err != nil {
		return nil, nil, nil, err
	}
	al := g.in.Aliases[req.Alias]
	if al == nil {
		return nil, nil, nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("gateway %q has no alias %q; its aliases: %s", g.Name, req.Alias, strings.Join(sortedKeys(g.in.Aliases), ", "))}
	}
	return req, g, al, nil
}

// serveWeight sets the weight of a group's member in an alias's weighted
// sets; 0 takes it out of new traffic.
func serveWeight(w http.ResponseWriter, r *http.Request) error {
	req, g, al, err := readAliasAction(r)
	if err != nil {
		return err
	}
	if req.Weight == nil || *req.Weight < 0 {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("weight must be given and not negative")}
	}
	if !al.HasMember(req.Group) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("alias %q has no weighted set with group %q", req.Alias, req.Group)}
	}
	what := map[string]any{"gateway": g.Name, "alias": req.Alias, "group": req.Group, "weight": *req.Weight}
	if g.reg != nil {
		rev, err := g.reg.Fleet.WriteWeight(r.Context(), req.Alias, req.Group, *req.Weight)
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf("nothing changed: %v", err)}
		}
		what["registry_revision"] = rev
		g.reg.Await(rev)
	} else {
		al.SetWeight(g.Name, req.Group, *req.Weight)
	}
	g.logger.Warn("weight set through the admin API", zap.String("alias", req.Alias), zap.String("group", req.Group), zap.Int("weight", *req.Weight))
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(what)
}

// serveDrill runs a fallback drill for an alias: each target in turn.
func serveDrill(w http.ResponseWriter, r *http.Request) error {
	_, g, al, err := readAliasAction(r)
	if err != nil {
		return err
	}
	results := drill(r.Context(), al)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"gateway": g.Name, "alias": al.Name, "targets": results})
}

// serveLedger answers GET /hybrid_llm/ledger?gateway=<name>&window=<duration>
// (or &from=<RFC 3339>&to=<RFC 3339>) with the three-way cost comparison
// of the window (default 1h, at most 31 days, the unfinished minute it
// ends in included) for each gateway, or the one named.
func serveLedger(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	from, to, err := ledgerWindowOf(r.URL.Query(), clock.Process.Now())
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	window := to.Sub(from)
	gws, err := gatewaysNamed(r.URL.Query().Get("gateway"))
	if err != nil {
		return err
	}
	out := []adminapi.LedgerGateway{}
	for _, g := range gws {
		if g.money.Ledger == nil {
			continue // still provisioning
		}
		c := g.money.Comparison(from, to)
		uses := g.money.Ledger.Clients(from, to)
		if c.SelfHostedPerMillionTokens != nil {
			for i := range uses {
				uses[i].SelfHostedUSD = float64(uses[i].SelfHostedTokens) * *c.SelfHostedPerMillionTokens / 1e6
			}
		}
		out = append(out, adminapi.LedgerGateway{Gateway: g.Name, Comparison: c, Clients: uses})
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(adminapi.LedgerDoc{Gateways: out, WindowSeconds: window.Seconds()})
}

func serveState(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	gws, err := gatewaysNamed(r.URL.Query().Get("gateway"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	doc := stateOf(gws)
	doc.Process = processState()
	return enc.Encode(doc)
}

// processState names this process.
func processState() *adminapi.ProcessState {
	host, _ := os.Hostname()
	version, _ := caddy.Version()
	return &adminapi.ProcessState{PID: os.Getpid(), Host: host, Version: version}
}

// maxLedgerWindow is the longest window the ledger answers for: what it
// holds.
const maxLedgerWindow = books.Buckets * books.BucketSize

// ledgerWindowOf reads a ledger query's window: window=<duration> back
// from t (default 1h; 7d, 30d), or from= and to= as RFC 3339 times. The
// window ends after the minute t is in, so that it includes it.
func ledgerWindowOf(q url.Values, t time.Time) (from, to time.Time, err error) {
	to = t.Truncate(books.BucketSize).Add(books.BucketSize)
	if f, tt := q.Get("from"), q.Get("to"); f != "" || tt != "" {
		if q.Get("window") != "" {
			return from, to, fmt.Errorf("give window, or from and to, not both")
		}
		if from, err = time.Parse(time.RFC3339, f); err != nil {
			return from, to, fmt.Errorf("from must be an RFC 3339 time, got %q", f)
		}
		if tt != "" {
			if to, err = time.Parse(time.RFC3339, tt); err != nil {
				return from, to, fmt.Errorf("to must be an RFC 3339 time, got %q", tt)
			}
		}
		if !from.Before(to) || to.Sub(from) > maxLedgerWindow {
			return from, to, fmt.Errorf("from must be before to, at most 31 days apart")
		}
		return from, to, nil
	}
	window := time.Hour
	if v := q.Get("window"); v != "" {
		d, err := caddy.ParseDuration(v)
		if err != nil || d <= 0 || d > maxLedgerWindow {
			return from, to, fmt.Errorf("window must be a duration up to 31 days (744h, 31d), got %q", v)
		}
		window = d
	}
	return t.Add(-window), to, nil
}

// Interface guards
var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)
