// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package hybridllm is the Caddy face of caddy-hybrid-llm: the
// http.handlers.hybrid_llm handler, its JSON config and Caddyfile, its
// provisioning (which wires the parts), the admin routes and the state
// document (README, "Design"). It may import every part; no part imports
// it, and only the root package and package caddyfile do.
package hybridllm

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"github.com/hybridllm/caddy-hybrid-llm/module/books"
	"github.com/hybridllm/caddy-hybrid-llm/module/clients"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/core"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleet"
	"github.com/hybridllm/caddy-hybrid-llm/module/fleetlink"
	"github.com/hybridllm/caddy-hybrid-llm/module/lograte"
	"github.com/hybridllm/caddy-hybrid-llm/module/money"
	"github.com/hybridllm/caddy-hybrid-llm/module/proclock"
	"github.com/hybridllm/caddy-hybrid-llm/module/protocol"
	"github.com/hybridllm/caddy-hybrid-llm/module/reload"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
	"go.uber.org/zap"

	// the log filter and encoder that keep client keys out of the access log
	_ "github.com/hybridllm/caddy-hybrid-llm/module/logkeys"
)

func init() {
	caddy.RegisterModule(Gateway{})
}

// defaultGatewayName names a gateway that has no name.
const defaultGatewayName = "default"

// DefaultMaxBodySize is the request body cap when none is configured.
const DefaultMaxBodySize = 8 << 20

// Gateway is the hybrid_llm handler: an OpenAI-compatible LLM gateway that
// routes a business alias (the `model` a client sends) to an ordered list
// of targets, each a group of upstream endpoints plus the model name that
// group serves. It rewrites `model` for every attempt, falls back to the
// next target when an attempt fails before its first response byte, and
// streams responses through unbuffered.
//
// It is a terminal handler: it answers every request it sees. Put it
// under a `handle /v1/*` block. It answers:
//
//   - `GET /v1/models` and `GET /v1/models/{alias}`: the aliases, in the
//     OpenAI list shape (upstream model names are never listed);
//   - any `POST` with a JSON body whose `model` is an alias
//     (`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, ...),
//     proxied to the same path on the target's group.
//
// Errors are answered in the OpenAI error shape
// `{"error":{"message","type","param","code"}}`.
//
// The client's credentials (`Authorization`, `Api-Key`, `X-Api-Key`) are
// never forwarded upstream; each group sends only its own `api_key`. A key
// anywhere else (the query string, a header of another spelling) is
// refused 401, and the request's access log record, which would hold it,
// skipped.
//
// Each request gets an id of the gateway's own, unique, echoed in the
// response and sent upstream as `X-Request-Id`; a client's own
// `X-Request-Id` is only noted, as `llm_client_request_id`. Unless
// disabled, the response also carries `X-Hybrid-Target` (the group that
// answered), with `response_model upstream` `X-Hybrid-Model` (the model
// name it was sent) and, after a fallback, `X-Hybrid-Fallback: true` and `X-Hybrid-Fallback-Reason`.
// Upstream response headers that tell where the request landed are not
// passed on (see PassHeaders), and answers carry the alias as their
// `model` (see ResponseModel). The access log entry of each request gets
// the fields `request_id`, `llm_client`, `llm_alias`, `llm_group`,
// `llm_model`, `llm_endpoint`, `llm_outcome`, `llm_ttfb` and, when they
// are not at their common value, `llm_client_request_id`, `llm_attempts`, `llm_tried`,
// `llm_fallback`, `llm_fallback_reason`, `llm_stream` and `llm_overflow`.
type Gateway struct {
	// The gateway's name in the admin API, logs and metrics; names must
	// be unique within a config. Default: `default`.
	Name string `json:"name,omitempty"`

	// Groups of interchangeable upstream endpoints, by name. Each group
	// is one embedded `reverse_proxy`.
	Groups map[string]*Group `json:"groups,omitempty"`

	// Aliases, by the business model name clients send.
	Aliases map[string]*routing.Alias `json:"aliases,omitempty"`

	// How requests are read, answered and sent on.
	RequestSettings

	// A daily cap on what all cloud targets together may cost.
	CloudSpend *CloudSpend `json:"cloud_spend,omitempty"`

	// Who may call: every request must name a known client, by API key
	// or by an identity Caddy established. Default: anyone who reaches
	// the handler.
	Clients *Clients `json:"clients,omitempty"`

	// The runtime state shared with other gateways: drains and weights,
	// kept in etcd and watched. Default: each gateway its own.
	Registry *RegistryConfig `json:"registry,omitempty"`

	in     front            // what the request side reads
	life   lifetime         // its config's life: context, storage, locks, registry slot
	money  money.Money      // its books, and how it charges requests
	sched  routing.Schedule // what its scheduler ticks
	reg    *fleetlink.Link  // with a registry: the gateway's tie to it
	logger *zap.Logger
	clock  clock.Clock // the time of its windows, holds and cooldowns
	// with a registry: its place among the live gateways
	fleetShare *atomic.Pointer[fleet.Share]
}

// RequestSettings are how a gateway reads its requests, answers them and
// sends them on.
type RequestSettings struct {
	// The largest request body accepted, in bytes; larger bodies are
	// refused with 413 before anything is forwarded. Default: 8 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// The longest a whole request may take, all attempts included, from
	// its arrival to the end of the response. When it passes before the
	// response has started, the request fails with 504; after that, a
	// stream ends with an error event. Default: no deadline.
	Deadline caddy.Duration `json:"deadline,omitempty"`

	// The inference endpoints a POST may go to, each the end of the
	// request's path; any other POST is answered 404. Default:
	// `chat/completions`, `completions`, `embeddings`, `responses`, and
	// Anthropic's `messages` and `messages/count_tokens`.
	Paths []string `json:"paths,omitempty"`

	// Whether the X-Hybrid-* response headers are sent. Default: true.
	// The X-Request-Id header is always sent.
	RouteHeaders *bool `json:"route_headers,omitempty"`

	// Whether a streamed (chat) completion whose client did not ask for
	// usage is sent upstream with stream_options.include_usage, so that
	// its tokens are counted; the extra usage chunk (and the
	// "usage":null of the other chunks) is removed before the client
	// sees it. false turns that off for the groups that do not set their
	// own stream_usage: their streams are then not counted. Default: true.
	StreamUsage *bool `json:"stream_usage,omitempty"`

	// Upstream response headers the client gets although the gateway
	// holds them back by default. By default the client gets none of
	// the headers that tell where its request landed or that belong to
	// the upstream's own site: `Server`, `Via`, `X-Powered-By`,
	// `Alt-Svc`, `Set-Cookie`, `Strict-Transport-Security`,
	// `Report-To`, `Reporting-Endpoints`, `Nel`, `Request-Id`,
	// `Apim-Request-Id`, `Cf-Ray`, and those starting with `Openai-`,
	// `Anthropic-`, `Azureml-`, `Cf-`, `Llm_provider-`, `X-Ratelimit-`,
	// `X-Envoy-`, `X-Kong-`, `X-Amzn-`, `X-Amz-`, `X-Ms-`, `X-Litellm-`
	// or `X-Cache`. Names are case-insensitive; `name*` passes every
	// header starting with `name`, `*` alone passes them all. Any other
	// header (Content-Type, Cache-Control, ...) always passes. Default:
	// none.
	PassHeaders []string `json:"pass_headers,omitempty"`

	// What the `model` field of answers says: `alias`, the alias the
	// client sent, in JSON answers and in every chunk of a stream; or
	// `upstream`, whatever the upstream answered (the model name of the
	// target that served it, or the cloud's dated version of it). An
	// alias may override it. Default: `alias`.
	ResponseModel string `json:"response_model,omitempty"`
}

// front is what a gateway's request side reads: resolved from the config
// as it is provisioned, read-only while it serves.
type front struct {
	core.Front                    // what the request core reads
	paths      *inferencePaths    // the paths inference is served on
	models     *aliasList         // what GET .../models answers
	strays     *clients.StrayKeys // refuses keys sent where none is read
}

// lifetime is what a gateway holds for its config's life.
type lifetime struct {
	ctx     context.Context   // done when the config stops
	storage certmagic.Storage // Caddy's, where the ledger persists
	locks   []string          // the lock files held, see proclock.go
	entry   *gatewayEntry
	begun   *atomic.Bool // its config started: its network work began
	// its config runs (it is not only validated): it reads and writes
	// its books in storage, under their lock with file_system storage
	ownsBooks bool
}

// CaddyModule returns the Caddy module information.
func (Gateway) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.hybrid_llm",
		New: func() caddy.Module { return new(Gateway) },
	}
}

// Provision sets up the gateway and loads each group's reverse proxy.
func (g *Gateway) Provision(ctx caddy.Context) error {
	err := g.provision(ctx)
	if err != nil {
		// the locks are let go now; Caddy's Cleanup after a failed
		// provision then finds none
		proclock.Release(g.life.locks...)
		g.life.locks = nil
	}
	return err
}

func (g *Gateway) provision(ctx caddy.Context) error {
	g.logger = ctx.Logger()
	g.clock = clock.Process
	g.life.ctx = ctx.Context
	g.life.storage = ctx.Storage()
	g.in.MirrorLog = g.logger.Named("mirror")
	g.in.BadUsage = new(lograte.Every)
	if g.Name == "" {
		g.Name = defaultGatewayName
	}
	g.in.strays = clients.NewStrayKeys(g.Name, g.Clients, g.clock, g.logger)
	owns, lock, err := lockBooks(ctx, g.life.storage, g.Name)
	g.life.ownsBooks = owns
	if lock != "" {
		g.life.locks = append(g.life.locks, lock)
	}
	if err != nil {
		return err
	}
	registerMetrics(ctx.GetMetricsRegistry(), g.logger)
	if err := g.provisionSettings(); err != nil {
		return err
	}
	used, err := g.provisionGroups(ctx)
	if err != nil {
		return err
	}
	g.money = money.Money{Groups: g.Groups, Cap: g.CloudSpend, Storage: g.life.storage, Logger: g.logger}
	g.money.ProvisionOccupancy()
	if g.life.storage != nil && g.Registry == nil {
		loadDrains(g.life.storage, g.Name, g.Groups, g.logger) // before any request
	}
	if err := g.provisionAliases(used); err != nil {
		return err
	}
	if !g.sched.Empty() {
		g.sched.Keep(ctx, g.clock, g.logger)
	}
	g.in.models = newAliasList(g.in.Aliases, time.Now())
	if c := g.CloudSpend; c != nil && (c.DailyUSD < 0 || c.WarnAt < 0 || c.WarnAt > 1) {
		return fmt.Errorf("cloud_spend: daily_usd must not be negative, warn_at must be a share from 0 to 1")
	}
	g.life.begun = new(atomic.Bool)
	if g.Registry != nil {
		g.fleetShare = new(atomic.Pointer[fleet.Share])
	}
	if err := g.provisionBooks(ctx); err != nil {
		return err
	}
	kit := routing.NewTargetKit(g.clock, g.logger, &g.money, time.Duration(g.Deadline))
	kit.Classes = g.in.Classes
	if g.Clients != nil && !g.in.Classes {
		for _, name := range sortedKeys(g.Clients.Clients) {
			if c := g.Clients.Clients[name]; c != nil && c.Sheddable {
				g.logger.Warn("a sheddable client, but no vllm group has classes: its requests go to the cloud like any other's",
					zap.String("client", name))
			}
		}
	}
	if g.in.Priority && !slices.Contains(g.in.Watch, "priority") {
		// a repeated priority field is refused (400), as the fields the
		// gateway reads are: vLLM would read the client's last one
		g.in.Watch = append(slices.Clip(g.in.Watch), "priority")
	}
	routing.EquipTargets(kit, g.in.Aliases)
	g.frontSettings()
	whenStarted(ctx, g.logger, func() { g.begin(ctx) })
	return nil
}

// frontSettings gives the request core what it reads of the gateway,
// once everything it reads is provisioned.
func (g *Gateway) frontSettings() {
	f := &g.in.Front
	f.Name, f.Clock, f.Logger, f.Money, f.Life = g.Name, g.clock, g.logger, &g.money, g.life.ctx
	f.Responses = routing.ResponseBookOf(g.Name)
	f.MaxBodySize, f.Deadline, f.RouteHeadersOn = g.MaxBodySize, g.Deadline, g.routeHeadersOn()
	if g.Clients != nil {
		f.ReserveTokens = g.Clients.ReserveTokens
	}
}

// provisionSettings checks the gateway's own settings and fills in their
// defaults.
func (g *Gateway) provisionSettings() error {
	if g.MaxBodySize == 0 {
		g.MaxBodySize = DefaultMaxBodySize
	}
	if g.MaxBodySize < 0 {
		return fmt.Errorf("max_body_size must be positive, got %d", g.MaxBodySize)
	}
	if g.Deadline < 0 {
		return fmt.Errorf("deadline must not be negative")
	}
	if err := routing.CheckResponseModel(g.ResponseModel); err != nil {
		return err
	}
	var err error
	if g.in.Pass, err = core.NewHeaderPass(g.PassHeaders); err != nil {
		return err
	}
	if g.in.paths, err = newInferencePaths(g.Paths); err != nil {
		return err
	}
	if len(g.Groups) == 0 {
		return fmt.Errorf("no groups configured")
	}
	if len(g.Aliases) == 0 {
		return fmt.Errorf("no aliases configured")
	}
	return nil
}

// provisionGroups provisions the groups, first, so that targets can refer
// to them; each learns the model names its aliases ask it for, so that
// its probes can check them. used is filled in by the aliases.
func (g *Gateway) provisionGroups(ctx caddy.Context) (used map[string]bool, err error) {
	for _, name := range sortedKeys(g.Aliases) {
		if al := g.Aliases[name]; al != nil {
			for _, t := range al.Targets {
				if t != nil {
					if grp := g.Groups[t.Group]; grp != nil && !slices.Contains(grp.Run.Expect, t.Model) && t.Model != "" {
						grp.Run.Expect = append(grp.Run.Expect, t.Model)
					}
				}
			}
		}
	}
	used = make(map[string]bool, len(g.Groups))
	for _, name := range sortedKeys(g.Groups) {
		grp := g.Groups[name]
		if grp == nil {
			return nil, fmt.Errorf("group %q: empty", name)
		}
		grp.AcquireShared(reload.Key(g.Name, name))
		grp.Run.Clock = g.clock
		if err := grp.Provision(ctx, name, g.MaxBodySize); err != nil {
			return nil, fmt.Errorf("group %q: %v", name, err)
		}
		if grp.Kind == KindVLLM && len(grp.Run.Proxy.Upstreams) == 0 && grp.Run.Proxy.DynamicUpstreams == nil && g.Registry == nil {
			return nil, fmt.Errorf("group %q of kind vllm has no upstream: give its vLLM servers' addresses (proxy.upstreams)", name)
		}
		hs, err := routing.NewEndpointHealth(g.Name, g.clock, g.logger, grp)
		if err != nil {
			return nil, fmt.Errorf("group %q: %v", name, err)
		}
		if hs != nil {
			g.sched.HealthSets = append(g.sched.HealthSets, hs)
		}
		grp.Run.StreamUsage = g.StreamUsage == nil || *g.StreamUsage
		if grp.StreamUsage != nil {
			grp.Run.StreamUsage = *grp.StreamUsage
		}
		g.in.AnyStreamUsage = g.in.AnyStreamUsage || grp.Run.StreamUsage
		g.in.Classes = g.in.Classes || grp.Classes != nil
		g.in.Priority = g.in.Priority || (grp.Classes != nil && grp.Classes.Priority)
	}
	return used, nil
}

// provisionAliases provisions the aliases over the groups, noting in used
// the groups they use, and warns of a group none uses.
func (g *Gateway) provisionAliases(used map[string]bool) error {
	g.in.Aliases = make(map[string]*routing.Alias, len(g.Aliases))
	s := routing.AliasSetup{Gateway: g.Name, Groups: g.Groups, Clients: g.Clients != nil, Registry: g.Registry != nil,
		ResponseModel: g.ResponseModel, Clock: g.clock, Logger: g.logger, Used: used}
	defer func() { g.in.Watch, g.in.RuleCredentials = s.Watch, s.RuleCredentials }()
	for _, name := range sortedKeys(g.Aliases) {
		al := g.Aliases[name]
		err := s.Provision(name, al)
		if al != nil {
			// what it set up, even if it then failed: a config that fails
			// hands the health it carried over back (see Schedule.Uncarry)
			g.sched.AddAlias(al)
		}
		if err != nil {
			return err
		}
		g.in.Aliases[name] = al
		if len(al.Colors) > 0 && g.in.Colors == nil {
			g.in.Colors = &routing.ColorPicker{Gateway: g.Name, Headers: g.routeHeadersOn(), Logger: g.logger}
		}
	}
	for _, name := range sortedKeys(g.Groups) {
		if !used[name] {
			g.logger.Warn("group is not used by any alias", zap.String("group", name))
		}
	}
	return nil
}

// provisionBooks sets up what the gateway counts and keeps: the spend
// book, the clients, the registry entry, the ledger and its journal, and
// with a registry the fleet.
func (g *Gateway) provisionBooks(ctx caddy.Context) error {
	if g.Clients != nil || g.CloudSpend != nil {
		switch {
		case g.Registry == nil && g.life.ownsBooks:
			g.money.Spend = books.StoredSpendBook(ctx, ctx.Storage(), g.Name, g.clock, g.logger)
		case g.Registry == nil:
			g.money.Spend = books.MemorySpendBook(g.Name, g.clock) // a config only validated
		default:
			// each process keeps a book of its own in the registry,
			// which counts a process's spend after it exited too (see
			// fleet_spend.go)
			g.money.Spend = books.MemorySpendBook(g.Name+"."+money.ProcessID(), g.clock)
		}
	}
	if g.Clients != nil {
		// the clients of the config and of the keys file in force, and
		// the keys file watched for changes
		cr := newCallers(g)
		if err := cr.Provision(ctx); err != nil {
			return err
		}
		g.in.Callers = cr
	}
	entry, err := enter(g, ctx.Context)
	if err != nil {
		return err
	}
	g.life.entry = entry
	bc := g.booksConfig()
	g.money.Ledger = books.Acquire(bc)
	g.money.Priced = g.CloudSpend != nil && g.CloudSpend.DailyUSD > 0
	for _, grp := range g.Groups {
		g.money.Priced = g.money.Priced || grp.Cost != nil
	}
	g.money.Ledger.Join(bc)
	if g.money.Spend != nil && g.money.Spend.Stored() {
		g.money.KeepSaving(ctx)
	}
	if g.Registry != nil {
		o, err := g.Registry.Options(g.Name, g.life.storage, g.logger)
		if err != nil {
			return err
		}
		l := &fleetlink.Link{Share: g.fleetShare, Gateway: g.Name, Groups: g.Groups, Aliases: g.in.Aliases, Logger: g.logger}
		if err := l.Join(o, g.money.Spend, g.clock); err != nil {
			return err
		}
		g.reg = l
		f := g.reg.Fleet
		g.money.Spend.ReplayPending(func(journal string) uint64 { return f.PublishedFrom(g.Name, journal, g.logger) }, g.logger)
	}
	return nil
}

// booksConfig is what the gateway's books need of it.
func (g *Gateway) booksConfig() books.Config {
	return books.Config{Gateway: g.Name, Storage: g.life.storage, Owns: g.life.ownsBooks, SelfGPUs: g.money.SelfGPUs,
		Spend: g.money.Spend, Fleet: g.Registry != nil, Clock: g.clock, Logger: g.logger}
}

// begin starts the gateway's network work once its config runs.
func (g *Gateway) begin(ctx caddy.Context) {
	g.life.begun.Store(true)
	for _, name := range sortedKeys(g.Groups) {
		grp := g.Groups[name]
		if vg := grp.VLLM; vg != nil {
			vg.Begin()
		}
		if grp.Cloud() {
			grp.StartModelCheck(ctx)
		}
	}
	if g.reg != nil {
		g.reg.Begin(ctx)
	}
}

// routeHeadersOn reports whether the X-Hybrid-* headers are sent.
func (g *Gateway) routeHeadersOn() bool { return g.RouteHeaders == nil || *g.RouteHeaders }

// Validate checks the gateway's configuration.
func (g *Gateway) Validate() error {
	for name := range g.in.Aliases {
		if strings.TrimSpace(name) != name {
			return fmt.Errorf("alias %q: leading or trailing spaces", name)
		}
	}
	return nil
}

// Cleanup releases the probers of the gateway's vLLM groups.
func (g *Gateway) Cleanup() error {
	if g.reg != nil && g.life.begun != nil && g.life.begun.Load() {
		g.reg.Book.Final()
	}
	g.money.SaveSpend()
	if g.reg != nil {
		g.reg.Release()
	}
	if g.money.Ledger != nil {
		books.Release(g.Name)
	}
	if g.life.entry != nil {
		g.life.entry.leave(g)
		g.life.entry = nil
	}
	g.sched.Uncarry()
	for _, grp := range g.Groups {
		grp.Cleanup()
	}
	proclock.Release(g.life.locks...)
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. The gateway is
// terminal: next is never called.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	// a POST's route holds its ids; any other request's are its own
	var rt *core.Route
	var heads *core.RequestHeads
	if r.Method == http.MethodPost {
		rt = new(core.Route)
		heads = rt.Heads()
	} else {
		heads = new(core.RequestHeads)
	}
	id, clientID := core.RequestID(w, r, heads)
	if where := g.in.strays.Find(r); where != "" {
		return g.in.strays.Refuse(w, r, id, clientID, where)
	}
	var cl *clients.Caller
	if g.Clients != nil {
		var ok bool
		if cl, ok = g.in.Callers.Authenticate(w, r); !ok {
			noteIDs(r, id, clientID, nil)
			return nil
		}
	}
	if r.Method == http.MethodPost {
		cleanPath(r)
		if !g.in.paths.allows(r.URL.Path) {
			return g.in.paths.refuse(w, r)
		}
		return rt.Start(&g.in.Front, w, r, id, clientID, cl).Serve()
	}
	noteIDs(r, id, clientID, cl)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return g.in.models.serve(w, r, cl)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		return protocol.ForPath(r.URL.Path).WriteError(w, protocol.Error{
			Status: http.StatusMethodNotAllowed, Type: protocol.TypeInvalidRequest, Code: "method_not_allowed",
			Message: "method " + r.Method + " is not allowed; use POST for inference or GET for models",
		})
	}
}

// noteIDs puts the request's ids and its client (if known) in its
// access log record, for a request the gateway answers without a route.
func noteIDs(r *http.Request, id, clientID string, cl *clients.Caller) {
	if extra := core.LogFields(r); extra != nil {
		extra.Set(zap.String("request_id", id))
		if clientID != "" {
			extra.Set(zap.String("llm_client_request_id", clientID))
		}
		if cl != nil {
			extra.Set(zap.String("llm_client", cl.Name))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Gateway)(nil)
	_ caddy.Validator             = (*Gateway)(nil)
	_ caddy.CleanerUpper          = (*Gateway)(nil)
	_ caddyhttp.MiddlewareHandler = (*Gateway)(nil)
)
