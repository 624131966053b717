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
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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

// Attempt limits when a target sets none. A non-stream answer starts only
// when its generation ends, so the whole attempt gets minutes; a stream's
// first token (queueing and prefill) should come within a minute.
const (
	DefaultAttemptTimeout   = 10 * time.Minute
	DefaultFirstByteTimeout = 60 * time.Second
)

// provisionLimits resolves the target's time limits: unset is the
// default, 0 is none.
func (t *Target) provisionLimits() error {
	for _, l := range []struct {
		name string
		set  *caddy.Duration
		def  time.Duration
		dst  *time.Duration
	}{
		{"timeout", t.Timeout, DefaultAttemptTimeout, &t.timeout},
		{"first_byte_timeout", t.FirstByteTimeout, DefaultFirstByteTimeout, &t.firstByte},
	} {
		switch {
		case l.set == nil:
			*l.dst = l.def
		case *l.set < 0:
			return fmt.Errorf("%s must not be negative (0 means no limit)", l.name)
		default:
			*l.dst = time.Duration(*l.set)
		}
	}
	return nil
}

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
// fallback, `X-Hybrid-Fallback: true` and `X-Hybrid-Fallback-Reason`.
// Upstream response headers that tell where the request landed are not
// passed on (see PassHeaders), and answers carry the alias as their
// `model` (see ResponseModel). The access log entry of each request gets
// the fields `request_id`, `llm_alias`, `llm_group`, `llm_model`,
// `llm_endpoint`, `llm_attempts`, `llm_tried`, `llm_fallback`,
// `llm_fallback_reason`, `llm_stream`, `llm_outcome` and `llm_ttfb`.
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
	// sees it. This turns that off for the groups that do not set their
	// own stream_usage: their streams are then not counted.
	DisableStreamUsage bool `json:"disable_stream_usage,omitempty"`

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

	pass        *headerPass
	aliases     map[string]*Alias
	streamUsage bool     // some group asks for stream usage
	watch       []string // the top-level fields rules look for
	entry       *gatewayEntry
	ledger      *ledger
	cfg         any // the config's context, to tell configs apart
	modelsList  []byte
	created     int64
	logger      *zap.Logger
	badUsage    *warnEvery // rate-limits the warning about bad usage values
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

	// What the `model` field of this alias's answers says: `alias` or
	// `upstream`, as the gateway's `response_model`. Default: the
	// gateway's.
	ResponseModel string `json:"response_model,omitempty"`

	name      string
	modelJSON []byte // the name as a JSON string, when answers carry it
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
	// stream ends with an error event. A non-stream answer only starts
	// once the whole generation is done, so this is also how long a
	// non-stream request waits for an upstream that never answers.
	// Default: 10m; 0 means no limit.
	Timeout *caddy.Duration `json:"timeout,omitempty"`

	// For streams: the longest an attempt may take to send its first
	// body byte (queueing and prefill included); then it is abandoned,
	// before anything reached the client, and the next target is tried.
	// Non-stream requests are bounded by timeout alone. Default: 60s; 0
	// means no limit.
	FirstByteTimeout *caddy.Duration `json:"first_byte_timeout,omitempty"`

	// Further attempts on this target after a failure before the next
	// target is tried; on a vllm group they avoid the endpoints that
	// failed. Default: 1 on a vllm group of several endpoints (a replica
	// that fails hands the request to another, not to the next target),
	// else 0.
	Retries *int `json:"retries,omitempty"`

	// The target's context window in tokens; default: for a vllm group,
	// the smallest max_model_len its endpoints report for the model.
	// A request whose estimated prompt plus max_tokens does not fit
	// skips the target.
	ContextWindow int `json:"context_window,omitempty"`

	// The upstream statuses that move the request to the next target
	// instead of reaching the client: statuses from 400 to 599, or 4 or
	// 5 for a whole class (as in Caddy's status matchers). 404 means any
	// 404; one that names the model is logged as model_not_found and, on
	// a vllm endpoint, marks it misconfigured. Replaces the default:
	// 401, 403, 404, 408, 429 and 5 (every 5xx).
	FallbackOn []int `json:"fallback_on,omitempty"`

	group      *Group
	timeout    time.Duration // 0: none
	firstByte  time.Duration // 0: none
	retries    int
	fallbackOn statusSet
	faults     faultLog
	modelJSON  []byte
	sameName   bool
	metrics    *targetMetrics
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
	g.badUsage = new(warnEvery)
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
	if err := checkResponseModel(g.ResponseModel); err != nil {
		return err
	}
	var err error
	if g.pass, err = newHeaderPass(g.PassHeaders); err != nil {
		return err
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
		grp.streamUsage = !g.DisableStreamUsage
		if grp.StreamUsage != nil {
			grp.streamUsage = *grp.StreamUsage
		}
		g.streamUsage = g.streamUsage || grp.streamUsage
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
		if err := checkResponseModel(al.ResponseModel); err != nil {
			return fmt.Errorf("alias %q: %v", name, err)
		}
		if answersCarryAlias(al.ResponseModel, g.ResponseModel) {
			al.modelJSON, _ = json.Marshal(name)
		}
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
			if (t.Retries != nil && *t.Retries < 0) || t.ContextWindow < 0 {
				return fmt.Errorf("alias %q: target %d (group %q): retries and context_window must not be negative", name, i, t.Group)
			}
			if err := t.provisionLimits(); err != nil {
				return fmt.Errorf("alias %q: target %d (group %q): %v", name, i, t.Group, err)
			}
			codes := t.FallbackOn
			if codes == nil {
				codes = defaultFallbackOn
			}
			set, err := newStatusSet(codes)
			if err != nil {
				return fmt.Errorf("alias %q: target %d (group %q): %v", name, i, t.Group, err)
			}
			t.fallbackOn = set
			t.group = grp
			t.retries = grp.defaultRetries()
			if t.Retries != nil {
				t.retries = *t.Retries
			}
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
