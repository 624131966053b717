// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package hybridllm holds the Caddy modules of caddy-hybrid-llm: the
// hybrid_llm gateway handler and its helpers.
package hybridllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Gateway{})
}

// Group kinds.
const (
	// KindVLLM is a self-hosted vLLM group.
	KindVLLM = "vllm"
	// KindOpenAI is a cloud or any other OpenAI-compatible API.
	KindOpenAI = "openai"
)

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
// never forwarded upstream; each group sends only its own `api_key`.
//
// Each request gets an id (an incoming `X-Request-Id` is honoured, else
// one is generated), echoed in the response and sent upstream. Unless
// disabled, the response also carries `X-Hybrid-Target` (the group that
// answered), `X-Hybrid-Model` (the model name it was sent) and, after a
// fallback, `X-Hybrid-Fallback: true` and `X-Hybrid-Fallback-Reason`. The access log entry of each request gets
// the fields `request_id`, `llm_alias`, `llm_group`, `llm_model`,
// `llm_endpoint`, `llm_attempts`, `llm_tried`, `llm_fallback`,
// `llm_fallback_reason`, `llm_stream` and `llm_ttfb`.
type Gateway struct {
	// The gateway's name in the admin API, logs and metrics; names must
	// be unique within a config. Default: `default`.
	Name string `json:"name,omitempty"`

	// Groups of interchangeable upstream endpoints, by name. Each group
	// is one embedded `reverse_proxy`.
	Groups map[string]*Group `json:"groups,omitempty"`

	// Aliases, by the business model name clients send.
	Aliases map[string]*Alias `json:"aliases,omitempty"`

	// The largest request body accepted, in bytes; larger bodies are
	// refused with 413 before anything is forwarded. Default: 8 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// The longest a whole request may take, all attempts included, from
	// its arrival to the end of the response. When it passes before the
	// response has started, the request fails with 504; after that, a
	// stream ends with an error event. Default: no deadline.
	Deadline caddy.Duration `json:"deadline,omitempty"`

	// Turns off the X-Hybrid-* response headers. The X-Request-Id
	// header is always sent.
	DisableRouteHeaders bool `json:"disable_route_headers,omitempty"`

	// By default, a streamed (chat) completion whose client did not ask
	// for usage is sent upstream with stream_options.include_usage, so
	// that its tokens are counted; the extra usage chunk (and the
	// "usage":null of the other chunks) is removed before the client
	// sees it. This turns that off: such streams are then not counted.
	DisableStreamUsage bool `json:"disable_stream_usage,omitempty"`

	aliases    map[string]*Alias
	watch      []string // the top-level fields rules look for
	entry      *gatewayEntry
	ledger     *ledger
	cfg        any // the config's context, to tell configs apart
	modelsList []byte
	created    int64
	logger     *zap.Logger
}

// Group is a named set of interchangeable endpoints that serve the same
// model names, proxied through one embedded `reverse_proxy`.
type Group struct {
	// The kind of API behind the group: `vllm` (self-hosted vLLM) or
	// `openai` (a cloud or other OpenAI-compatible API). Required.
	Kind string `json:"kind,omitempty"`

	// The API key this group sends upstream as `Authorization: Bearer
	// <key>`. Placeholders are resolved once at provisioning; use
	// `{env.NAME}` so the key stays out of the config. The client's
	// own credentials are never forwarded.
	APIKey string `json:"api_key,omitempty"`

	// The group's `reverse_proxy` handler config (the JSON of
	// `http.handlers.reverse_proxy`, without the `handler` key): its
	// upstreams, transport (TLS), load balancing, health checks,
	// header operations and request buffering all work as in a plain
	// `reverse_proxy`. Selecting no upstream (none healthy or
	// available) counts as a failure of this target.
	ProxyRaw json.RawMessage `json:"proxy,omitempty"`

	// vLLM's --max-num-seqs of each endpoint (kind vllm): the red line,
	// the most requests the gateway keeps in flight to one endpoint,
	// even when metrics fail. Default: no red line.
	MaxNumSeqs int `json:"max_num_seqs,omitempty"`

	// Requests allowed to wait in an endpoint's queue beyond
	// max_num_seqs before its red line is reached (kind vllm).
	// Default: 0.
	MaxQueue int `json:"max_queue,omitempty"`

	// Per-endpoint settings (kind vllm), by the upstream's dial address
	// as written in the proxy's upstreams.
	Endpoints map[string]*EndpointConfig `json:"endpoints,omitempty"`

	// How the endpoints are probed (kind vllm). Default: on, with the
	// ProbeConfig defaults.
	Probe *ProbeConfig `json:"probe,omitempty"`

	// How often the target model names are checked against the group's
	// GET /v1/models (kind openai), sent through the group's proxy with
	// its credentials. A name the API does not list is logged as an
	// error at once; it does not stop the config. Default: 5m.
	ModelCheckInterval caddy.Duration `json:"model_check_interval,omitempty"`

	// Turns the model name check of an openai group off.
	DisableModelCheck bool `json:"disable_model_check,omitempty"`

	// When the group overflows (kind vllm): new requests skip it while
	// it is congested.
	Overflow *OverflowConfig `json:"overflow,omitempty"`

	// A circuit breaker for the group, and for each endpoint of a vllm
	// group. Default: none.
	Breaker *BreakerConfig `json:"breaker,omitempty"`

	// The group's cost model, for the cost ledger and the cloud spend.
	Cost *CostConfig `json:"cost,omitempty"`

	inflight  atomic.Int64 // requests the gateway has in flight to the group
	name      string
	shared    *groupShared
	sharedKey string
	proxy     *reverseproxy.Handler
	key       string   // the resolved api_key
	expect    []string // the model names the aliases send to this group
	vllm      *vllmGroup
	check     modelCheck
}

// EndpointConfig holds the settings of one endpoint of a vLLM group.
type EndpointConfig struct {
	// This endpoint's --max-num-seqs, overriding the group's.
	MaxNumSeqs int `json:"max_num_seqs,omitempty"`

	// The endpoint's capacity relative to the others (a replica on
	// twice the GPUs: 2); its load score is divided by it. Default: 1.
	Weight float64 `json:"weight,omitempty"`
}

// Alias maps a business model name to the targets that can serve it.
type Alias struct {
	// The targets, in order of preference. A request goes to the first
	// one; a failure before the first response byte (dial error,
	// connection reset, timeout, HTTP 429 or 5xx, no endpoint
	// available) moves it to the next.
	Targets []*Target `json:"targets,omitempty"`

	// Pre-routing rules, evaluated in order before any upstream is
	// tried: the first that matches sends the request straight to its
	// target.
	Routes []*Rule `json:"routes,omitempty"`

	name string
}

// Target is one entry of an alias: a group plus the model name that
// group serves.
type Target struct {
	// The name of the group.
	Group string `json:"group,omitempty"`

	// The model name the group serves for this alias; the request's
	// `model` is rewritten to it for this target only.
	Model string `json:"model,omitempty"`

	// The longest one attempt on this target may take, from sending the
	// request to the end of the response. Passing it before the first
	// response byte moves the request to the next target; after that, a
	// stream ends with an error event. Default: no limit.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// For streams: the longest an attempt may take to send its first
	// body byte; then it is abandoned (before anything reached the
	// client) and the next target is tried. Default: no limit.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`

	// Further attempts on this target after a failure before the next
	// target is tried; on a vllm group they avoid the endpoints that
	// failed. Default: 0.
	Retries int `json:"retries,omitempty"`

	// The target's context window in tokens; default: for a vllm group,
	// the smallest max_model_len its endpoints report for the model.
	// A request whose estimated prompt plus max_tokens does not fit
	// skips the target.
	ContextWindow int `json:"context_window,omitempty"`

	group     *Group
	modelJSON []byte
	sameName  bool
	metrics   *targetMetrics
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
	g.logger = ctx.Logger()
	if g.Name == "" {
		g.Name = defaultGatewayName
	}
	registerMetrics(ctx.GetMetricsRegistry(), g.logger)
	if g.MaxBodySize == 0 {
		g.MaxBodySize = DefaultMaxBodySize
	}
	if g.MaxBodySize < 0 {
		return fmt.Errorf("max_body_size must be positive, got %d", g.MaxBodySize)
	}
	if g.Deadline < 0 {
		return fmt.Errorf("deadline must not be negative")
	}
	if len(g.Groups) == 0 {
		return fmt.Errorf("no groups configured")
	}
	if len(g.Aliases) == 0 {
		return fmt.Errorf("no aliases configured")
	}

	// the model names each group is asked for, so that its probes can
	// check them
	for _, name := range sortedKeys(g.Aliases) {
		if al := g.Aliases[name]; al != nil {
			for _, t := range al.Targets {
				if t != nil {
					if grp := g.Groups[t.Group]; grp != nil && !slices.Contains(grp.expect, t.Model) && t.Model != "" {
						grp.expect = append(grp.expect, t.Model)
					}
				}
			}
		}
	}

	// groups first, so that targets can refer to them
	used := make(map[string]bool, len(g.Groups))
	for _, name := range sortedKeys(g.Groups) {
		grp := g.Groups[name]
		if grp == nil {
			return fmt.Errorf("group %q: empty", name)
		}
		grp.acquireShared(g.Name + "/" + name)
		if err := grp.provision(ctx, name, g.MaxBodySize); err != nil {
			return fmt.Errorf("group %q: %v", name, err)
		}
	}

	g.aliases = make(map[string]*Alias, len(g.Aliases))
	for _, name := range sortedKeys(g.Aliases) {
		al := g.Aliases[name]
		if name == "" {
			return fmt.Errorf("alias with an empty name")
		}
		if al == nil || len(al.Targets) == 0 {
			return fmt.Errorf("alias %q: no targets", name)
		}
		al.name = name
		for i, t := range al.Targets {
			if t == nil {
				return fmt.Errorf("alias %q: target %d: empty", name, i)
			}
			grp, ok := g.Groups[t.Group]
			if !ok {
				return fmt.Errorf("alias %q: target %d: unknown group %q", name, i, t.Group)
			}
			if t.Model == "" {
				return fmt.Errorf("alias %q: target %d (group %q): a model name is required", name, i, t.Group)
			}
			if t.Timeout < 0 || t.FirstByteTimeout < 0 || t.Retries < 0 || t.ContextWindow < 0 {
				return fmt.Errorf("alias %q: target %d (group %q): timeout, first_byte_timeout, retries and context_window must not be negative", name, i, t.Group)
			}
			t.group = grp
			t.modelJSON, _ = json.Marshal(t.Model)
			t.metrics = newTargetMetrics(g.Name, name, t)
			t.sameName = t.Model == name
			used[t.Group] = true
		}
		for _, r := range al.Routes {
			if r == nil {
				return fmt.Errorf("alias %q: empty route", name)
			}
			if err := r.provision(g, al); err != nil {
				return fmt.Errorf("alias %q: %v", name, err)
			}
		}
		g.aliases[name] = al
	}
	for _, name := range sortedKeys(g.Groups) {
		if !used[name] {
			g.logger.Warn("group is not used by any alias", zap.String("group", name))
		}
	}

	g.created = time.Now().Unix()
	g.modelsList = g.buildModelsList()
	if err := g.register(ctx.Context); err != nil {
		return err
	}
	g.ledger = acquireLedger(g)
	return nil
}

// provision checks the group and loads its reverse proxy.
func (grp *Group) provision(ctx caddy.Context, name string, maxBody int64) error {
	grp.name = name
	switch grp.Kind {
	case KindVLLM, KindOpenAI:
	case "":
		return fmt.Errorf("kind is required (%s or %s)", KindVLLM, KindOpenAI)
	default:
		return fmt.Errorf("unknown kind %q (want %s or %s)", grp.Kind, KindVLLM, KindOpenAI)
	}
	if len(grp.ProxyRaw) == 0 {
		return fmt.Errorf("no proxy configured")
	}
	if grp.Kind != KindVLLM && (grp.MaxNumSeqs != 0 || grp.MaxQueue != 0 || len(grp.Endpoints) > 0 || grp.Probe != nil) {
		return fmt.Errorf("max_num_seqs, max_queue, endpoints and probe apply to groups of kind %s only", KindVLLM)
	}
	if grp.Kind == KindVLLM && (grp.ModelCheckInterval != 0 || grp.DisableModelCheck) {
		return fmt.Errorf("model_check applies to groups of kind %s only; vLLM endpoints are checked by their probes", KindOpenAI)
	}
	if grp.MaxNumSeqs < 0 || grp.MaxQueue < 0 || grp.ModelCheckInterval < 0 {
		return fmt.Errorf("max_num_seqs, max_queue and model_check_interval must not be negative")
	}
	if grp.Cost != nil {
		if err := grp.Cost.validate(grp.Kind); err != nil {
			return err
		}
	}
	if grp.Overflow != nil {
		if grp.Kind != KindVLLM {
			return fmt.Errorf("overflow applies to groups of kind %s only", KindVLLM)
		}
		if err := grp.Overflow.validate(); err != nil {
			return err
		}
	}
	if bc := grp.Breaker; bc != nil {
		if err := bc.validate(); err != nil {
			return err
		}
		if _, _, cool := bc.params(); bc.LoadTime > 0 && cool < time.Duration(bc.LoadTime) {
			ctx.Logger().Warn("breaker cooldown is shorter than the model load time: traffic returns before the model is ready and the breaker oscillates",
				zap.String("group", name), zap.Duration("cooldown", cool), zap.Duration("load_time", time.Duration(bc.LoadTime)))
		}
	}
	raw := grp.ProxyRaw
	if grp.Kind == KindVLLM {
		// the queue-aware policy is the default of vLLM groups
		switch policy := gjson.GetBytes(raw, "load_balancing.selection_policy.policy").String(); policy {
		case "":
			var err error
			raw, err = sjson.SetRawBytes(slices.Clone(raw), "load_balancing.selection_policy", []byte(`{"policy":"vllm_least_load"}`))
			if err != nil {
				return fmt.Errorf("setting the selection policy: %v", err)
			}
		case "vllm_least_load":
		default:
			ctx.Logger().Warn("vLLM group with another selection policy: no queue-aware selection and no red line",
				zap.String("group", name), zap.String("lb_policy", policy))
		}
	}
	// retries inside the group replay the body only when the proxy
	// buffered it; the gateway holds it whole anyway
	if (gjson.GetBytes(raw, "load_balancing.retries").Int() > 0 || gjson.GetBytes(raw, "load_balancing.try_duration").Exists()) &&
		!gjson.GetBytes(raw, "request_buffers").Exists() {
		var err error
		raw, err = sjson.SetBytes(slices.Clone(raw), "request_buffers", maxBody)
		if err != nil {
			return fmt.Errorf("setting request_buffers: %v", err)
		}
	}
	if grp.APIKey != "" {
		key := caddy.NewReplacer().ReplaceAll(grp.APIKey, "")
		grp.key = key
		if key == "" {
			ctx.Logger().Warn("api_key of group resolves to an empty value; requests go out without credentials",
				zap.String("group", name))
		} else {
			// the key goes into the proxy's own header operations, which
			// act on its copy of the request: it never touches the
			// request the access log sees
			var err error
			raw, err = sjson.SetBytes(slices.Clone(raw), "headers.request.set.Authorization", []string{"Bearer " + key})
			if err != nil {
				return fmt.Errorf("setting api_key: %v", err)
			}
		}
	}
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", raw)
	if err != nil {
		return fmt.Errorf("loading proxy: %v", err)
	}
	grp.proxy = mod.(*reverseproxy.Handler)

	switch grp.Kind {
	case KindVLLM:
		return grp.provisionVLLM(ctx)
	case KindOpenAI:
		grp.startModelCheck(ctx)
	}
	return nil
}

// provisionVLLM starts (or joins) the probers of the group's endpoints.
func (grp *Group) provisionVLLM(ctx caddy.Context) error {
	settings, staleAfter, unknownOK, err := grp.Probe.provision()
	if err != nil {
		return err
	}
	settings.apiKey = grp.key
	settings.expect = grp.expect
	vg := &vllmGroup{
		name:       grp.name,
		maxNumSeqs: grp.MaxNumSeqs,
		maxQueue:   grp.MaxQueue,
		staleAfter: staleAfter,
		unknownOK:  unknownOK,
		breakers:   grp.Breaker != nil,
		breaker:    grp.Breaker,
		endpoints:  make(map[string]*endpoint),
		byUpstream: make(map[*reverseproxy.Upstream]*endpoint),
	}
	grp.vllm = vg
	scheme := "http"
	if ht, ok := grp.proxy.Transport.(*reverseproxy.HTTPTransport); ok && ht.TLSEnabled() {
		scheme = "https"
	}
	for _, u := range grp.proxy.Upstreams {
		if !probeable(u.Dial) {
			ctx.Logger().Warn("upstream address cannot be probed; it is balanced on in-flight counts only",
				zap.String("group", grp.name), zap.String("upstream", u.Dial))
			continue
		}
		if ep, dup := vg.endpoints[u.Dial]; dup {
			vg.byUpstream[u] = ep
			continue
		}
		p, err := acquireProber(scheme+"://"+u.Dial, grp, settings, ctx.Logger())
		if err != nil {
			return fmt.Errorf("probing %s: %v", u.Dial, err)
		}
		es := grp.shared.endpoint(u.Dial)
		ep := &endpoint{dial: u.Dial, p: p, weight: 1, br: &es.breaker, drained: &es.drained}
		vg.endpoints[u.Dial] = ep
		vg.byUpstream[u] = ep
	}
	for dial, ec := range grp.Endpoints {
		ep := vg.endpoints[dial]
		if ep == nil || ec == nil {
			return fmt.Errorf("endpoint %q is not an upstream of the group", dial)
		}
		if ec.MaxNumSeqs < 0 || ec.Weight < 0 {
			return fmt.Errorf("endpoint %q: max_num_seqs and weight must not be negative", dial)
		}
		ep.maxNumSeqs = ec.MaxNumSeqs
		if ec.Weight > 0 {
			ep.weight = ec.Weight
		}
	}
	if len(grp.proxy.Upstreams) == 0 && grp.proxy.DynamicUpstreams != nil {
		ctx.Logger().Warn("dynamic upstreams are not probed; the group is balanced on in-flight counts only",
			zap.String("group", grp.name))
	}
	return nil
}

// cleanup releases what the group holds in shared state.
// The endpoints map stays: requests of an unloaded config may still be
// in flight, and a released prober's data merely goes stale.
func (grp *Group) cleanup() {
	if grp == nil {
		return
	}
	if grp.sharedKey != "" {
		_, _ = groupStates.Delete(grp.sharedKey)
		grp.sharedKey = ""
	}
	if grp.vllm == nil || grp.vllm.released {
		return
	}
	grp.vllm.released = true
	for _, ep := range grp.vllm.endpoints {
		releaseProber(ep.p, grp)
	}
}

// Validate checks the gateway's configuration.
func (g *Gateway) Validate() error {
	for name := range g.aliases {
		if strings.TrimSpace(name) != name {
			return fmt.Errorf("alias %q: leading or trailing spaces", name)
		}
	}
	return nil
}

// Cleanup releases the probers of the gateway's vLLM groups.
func (g *Gateway) Cleanup() error {
	if g.ledger != nil {
		releaseLedger(g)
	}
	g.unregister()
	for _, grp := range g.Groups {
		grp.cleanup()
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. The gateway is
// terminal: next is never called.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	id := requestID(r)
	w.Header().Set("X-Request-Id", id)
	if r.Method == http.MethodPost {
		return g.serveInference(w, r, id)
	}
	if extra := logFields(r); extra != nil {
		extra.Set(zap.String("request_id", id))
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return g.serveModels(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		return writeError(w, http.StatusMethodNotAllowed, errTypeInvalidRequest, "method_not_allowed", "",
			"method "+r.Method+" is not allowed; use POST for inference or GET for models")
	}
}

// logFields returns the access log's extra fields of the request, if any.
func logFields(r *http.Request) *caddyhttp.ExtraLogFields {
	extra, _ := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields)
	return extra
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
