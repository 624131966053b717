// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package upstream

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/hybridllm/caddy-hybrid-llm/module/breaker"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/healthscore"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/probe"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"
)

// ProbeConfig sets how the endpoints of a vLLM group are probed (see
// probe.Config).
type ProbeConfig = probe.Config

// Group kinds.
const (
	// KindVLLM is a self-hosted vLLM group.
	KindVLLM = "vllm"
	// KindOpenAI is a cloud or any other OpenAI-compatible API.
	KindOpenAI = "openai"
	// KindAnthropic is Anthropic's API (or one that speaks it): the
	// Messages API, its key in x-api-key with an anthropic-version.
	KindAnthropic = "anthropic"
)

// anthropicVersion is the anthropic-version an anthropic group's
// requests carry: the API's one version.
const anthropicVersion = "2023-06-01"

// Cloud reports whether the group is a cloud's (priced per token or
// second, its spend counted) rather than self-hosted vLLM.
func (grp *Group) Cloud() bool { return grp.Kind != KindVLLM }

// BodySlack is how much a request body may grow on its way upstream: a
// longer model name swapped in, the stream usage asked for.
const BodySlack = 4 << 10

// Group is a named set of interchangeable endpoints that serve the same
// model names, proxied through one embedded `reverse_proxy`.
type Group struct {
	// The kind of API behind the group: `vllm` (self-hosted vLLM),
	// `openai` (a cloud or other OpenAI-compatible API) or `anthropic`
	// (Anthropic's API). Required.
	Kind string `json:"kind,omitempty"`

	// The API key this group sends upstream as `Authorization: Bearer
	// <key>` (an anthropic group: as `x-api-key`, with its
	// `anthropic-version`). Placeholders are resolved once at provisioning; use
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

	// The vLLM endpoints' red line, settings and probes (kind vllm).
	VLLMSettings

	// How often the target model names are checked against the group's
	// GET /v1/models (kind openai), sent through the group's proxy with
	// its credentials: a duration, or "off". A name the API does not
	// list is logged as an error at once; it does not stop the config.
	// Default: 5m.
	ModelCheck string `json:"model_check,omitempty"`

	// When the group overflows (kind vllm): new requests skip it while
	// it is congested.
	Overflow *OverflowConfig `json:"overflow,omitempty"`

	// A circuit breaker for the group, and for each endpoint of a vllm
	// group. Default: none.
	Breaker *breaker.Config `json:"breaker,omitempty"`

	// Health-score scheduling of the group's endpoints (kind vllm): each
	// is scored over its own window as a weighted set's member is, and
	// one over a threshold (or failing its probes) gets no request, the
	// others taking its share, until it ramps back after a hold. The
	// last endpoint in service is kept. Default: none.
	Health *healthscore.Config `json:"health,omitempty"`

	// The group's cost model, for the cost ledger and the cloud spend.
	Cost *CostConfig `json:"cost,omitempty"`

	// The APIs the group's upstreams speak, and how a stream's usage is
	// asked of them.
	APISettings

	// The group's runtime, set as it is provisioned: requests the
	// gateway has in flight to it, its state that outlives reloads, its
	// vLLM endpoints (kind vllm), its model name check, and what is
	// resolved from the config.
	Inflight atomic.Int64 `json:"-"`
	Shared   *GroupState  `json:"-"`
	VLLM     *VLLMGroup   `json:"-"`
	Check    ModelCheck   `json:"-"`
	Run      GroupRun     `json:"-"`
}

// APISettings are the APIs a group's upstreams speak, and how a stream's
// usage is asked of them.
type APISettings struct {
	// The APIs the group's upstreams serve, by endpoint: chat/completions,
	// completions, embeddings, responses, messages (Anthropic's Messages
	// API) and messages/count_tokens. A request to another is passed over
	// by the group's targets (reason protocol_unsupported). Default: a
	// vllm group, all of them (vLLM serves the Messages API itself); an
	// openai group, the OpenAI ones; an anthropic group, messages and
	// messages/count_tokens.
	APIs []string `json:"apis,omitempty"`

	// Whether a streamed (chat) completion whose client did not ask for
	// usage is sent to this group with stream_options.include_usage, so
	// that its tokens are counted (the extra usage chunk is removed
	// before the client sees it). Turn it off for an OpenAI-compatible
	// provider that refuses unknown fields. Default: the gateway's
	// setting (on).
	StreamUsage *bool `json:"stream_usage,omitempty"`

	// How a request of an API the group does not serve reaches it in one
	// it does: Anthropic's Messages API as chat completions, to a group
	// that serves chat/completions and not messages. "exact" sends only
	// what chat carries whole, and passes the group's targets over
	// (protocol_unsupported) for a request that holds more (extended
	// thinking, a document); "lossy" leaves that part out; "off" never
	// translates. Default: exact.
	Translate string `json:"translate,omitempty"`
}

// OpenAIHosted reports whether the group's upstreams are OpenAI's own
// API (api.openai.com, Azure OpenAI): its reasoning models take a
// length as max_completion_tokens and refuse max_tokens, which other
// OpenAI-compatible servers may not know.
func (grp *Group) OpenAIHosted() bool {
	if grp.Run.Proxy == nil {
		return false
	}
	for _, u := range grp.Run.Proxy.Upstreams {
		host, _, err := net.SplitHostPort(u.Dial)
		if err != nil {
			host = u.Dial
		}
		if host == "api.openai.com" || strings.HasSuffix(host, ".openai.azure.com") {
			return true
		}
	}
	return false
}

// The values of APISettings.Translate.
const (
	TranslateExact = "exact"
	TranslateLossy = "lossy"
	TranslateOff   = "off"
)

// TranslatesMessages reports whether a Messages request reaches the group
// translated into chat completions, and whether what chat cannot carry is
// left out (lossy) rather than a reason to pass the group over.
func (grp *Group) TranslatesMessages() (on, lossy bool) {
	if grp.Translate == TranslateOff || grp.Serves("messages") || !grp.Serves("chat/completions") {
		return false, false
	}
	return true, grp.Translate == TranslateLossy
}

// The APIs a group serves unless it says (see APISettings.APIs);
// VLLMAPIs are all the gateway knows.
var (
	OpenAIAPIs    = []string{"chat/completions", "completions", "embeddings", "responses"}
	AnthropicAPIs = []string{"messages", "messages/count_tokens"}
	VLLMAPIs      = []string{"chat/completions", "completions", "embeddings", "responses", "messages", "messages/count_tokens"}
)

// Serves reports whether the group's upstreams serve the API of an
// endpoint ("": one the gateway forwards without knowing it, which any
// group may serve).
func (grp *Group) Serves(endpoint string) bool {
	apis := grp.APIs
	if len(apis) == 0 {
		apis = defaultAPIs(grp.Kind)
	}
	return endpoint == "" || slices.Contains(apis, endpoint)
}

// defaultAPIs are the APIs a group of a kind serves unless it says.
func defaultAPIs(kind string) []string {
	switch kind {
	case KindVLLM:
		return VLLMAPIs
	case KindAnthropic:
		return AnthropicAPIs
	}
	return OpenAIAPIs
}

// ServesAll reports whether the group serves every API a vllm group
// serves by default: no request is passed over for its API.
func (grp *Group) ServesAll() bool {
	for _, api := range VLLMAPIs {
		if !grp.Serves(api) {
			return false
		}
	}
	return true
}

// VLLMSettings are a vllm group's red line, per-endpoint settings and
// probes.
type VLLMSettings struct {
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

	// Prefix-cache affinity (kind vllm): a conversation's requests go to
	// the endpoint that holds its start, within a load bound. Default:
	// off, endpoints chosen by load alone.
	Affinity *AffinityConfig `json:"affinity,omitempty"`

	// Priority classes (kind vllm): each endpoint's red line shared by
	// the requests' classes, with the rest kept for the classes above,
	// vLLM's priority field, and the queue of sheddable clients'
	// requests. Default: off, every class up to the red line.
	Classes *priority.Config `json:"classes,omitempty"`
}

// GroupRun is a group's runtime, resolved from its config.
type GroupRun struct {
	Name      string
	Pos       string // in a Caddyfile: where it is, for errors
	sharedKey string
	Proxy     *reverseproxy.Handler
	// what an attempt is served by: the proxy, or a unit test's upstream
	Serve  caddyhttp.MiddlewareHandler
	key    string      // the resolved api_key
	Expect []string    // the model names the aliases send to this group
	Clock  clock.Clock // the gateway's
	// Group.StreamUsage resolved against the gateway's default
	StreamUsage bool
	CheckOff    bool          // model_check off
	checkEvery  time.Duration // model_check's interval; 0: the default
	// the GPUs one request in flight occupies, for the ledger (see
	// money.Money.ProvisionOccupancy); 0: not counted
	Occupancy float64
}

// EndpointConfig holds the settings of one endpoint of a vLLM group.
type EndpointConfig struct {
	// This endpoint's --max-num-seqs, overriding the group's.
	MaxNumSeqs int `json:"max_num_seqs,omitempty"`

	// The endpoint's capacity relative to the others (a replica on
	// twice the GPUs: 2); its load score is divided by it. Default: 1.
	Weight float64 `json:"weight,omitempty"`
}

// Provision checks the group and loads its reverse proxy.
func (grp *Group) Provision(ctx caddy.Context, name string, maxBody int64) error {
	grp.Run.Name = name
	grp.Check.clock = grp.Run.Clock
	if err := grp.validate(); err != nil {
		return err
	}
	if bc := grp.Breaker; bc != nil {
		if err := bc.Validate(); err != nil {
			return err
		}
		if _, _, cool := bc.Params(); bc.LoadTime > 0 && cool < time.Duration(bc.LoadTime) {
			ctx.Logger().Warn("breaker cooldown is shorter than the model load time: traffic returns before the model is ready and the breaker oscillates",
				zap.String("group", name), zap.Duration("cooldown", cool), zap.Duration("load_time", time.Duration(bc.LoadTime)))
		}
	}
	raw, err := grp.proxyConfig(ctx, maxBody)
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", raw)
	if err != nil {
		return fmt.Errorf("loading proxy: %v", err)
	}
	grp.Run.Proxy = mod.(*reverseproxy.Handler)
	grp.Run.Serve = grp.Run.Proxy
	if lb := grp.Run.Proxy.LoadBalancing; lb != nil && lb.SelectionPolicy != nil {
		// a drill reaches each endpoint in turn, whatever the policy
		lb.SelectionPolicy = pinnedSelection{lb.SelectionPolicy}
	}
	if grp.Run.key != "" {
		warnKeyExposure(ctx.Logger(), name, grp.APIKey, grp.Run.Proxy)
	}

	switch grp.Kind {
	case KindVLLM:
		return grp.provisionVLLM(ctx)
	}
	return nil
}

// checkAPIs checks the APIs the group says it serves.
func (grp *Group) checkAPIs() error {
	for _, api := range grp.APIs {
		if !slices.Contains(VLLMAPIs, api) {
			// an endpoint the gateway does not know is served by any
			// group: naming it means a typo
			return fmt.Errorf("apis: %q is not an API the gateway knows: %s", api, strings.Join(VLLMAPIs, ", "))
		}
	}
	switch grp.Translate {
	case "", TranslateExact, TranslateLossy, TranslateOff:
	default:
		return fmt.Errorf("translate: want %s, %s or %s, got %q", TranslateExact, TranslateLossy, TranslateOff, grp.Translate)
	}
	return nil
}

// validate checks the group's settings, and reads its model_check.
func (grp *Group) validate() error {
	switch grp.Kind {
	case KindVLLM, KindOpenAI, KindAnthropic:
	case "":
		return fmt.Errorf("kind is required (%s, %s or %s)", KindVLLM, KindOpenAI, KindAnthropic)
	default:
		return fmt.Errorf("unknown kind %q (want %s, %s or %s)", grp.Kind, KindVLLM, KindOpenAI, KindAnthropic)
	}
	if len(grp.ProxyRaw) == 0 {
		return fmt.Errorf("no proxy configured")
	}
	if err := grp.checkAPIs(); err != nil {
		return err
	}
	if grp.Kind != KindVLLM && (grp.MaxNumSeqs != 0 || grp.MaxQueue != 0 || len(grp.Endpoints) > 0 || grp.Probe != nil || grp.Health != nil || grp.Affinity != nil || grp.Classes != nil) {
		return fmt.Errorf("max_num_seqs, max_queue, endpoints, probe, health, affinity and classes apply to groups of kind %s only (a weighted set's health watches any target)", KindVLLM)
	}
	if grp.Kind == KindVLLM && grp.ModelCheck != "" {
		return fmt.Errorf("model_check applies to cloud groups (kind %s or %s) only; vLLM endpoints are checked by their probes", KindOpenAI, KindAnthropic)
	}
	if grp.MaxNumSeqs < 0 || grp.MaxQueue < 0 {
		return fmt.Errorf("max_num_seqs and max_queue must not be negative")
	}
	switch grp.ModelCheck {
	case "":
	case "off":
		grp.Run.CheckOff = true
	default:
		d, err := caddy.ParseDuration(grp.ModelCheck)
		if err != nil || d <= 0 {
			return fmt.Errorf("model_check: want a positive duration or off, got %q", grp.ModelCheck)
		}
		grp.Run.checkEvery = d
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
		if err := grp.Overflow.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// proxyConfig is the group's reverse_proxy config as the gateway loads it:
// a vLLM group's selection policy by default, the request buffered for
// retries inside the group, the api_key in the proxy's own header
// operations (and its active health checks').
func (grp *Group) proxyConfig(ctx caddy.Context, maxBody int64) (json.RawMessage, error) {
	name := grp.Run.Name
	raw := grp.ProxyRaw
	if grp.Kind == KindVLLM {
		// the queue-aware policy is the default of vLLM groups
		switch policy := gjson.GetBytes(raw, "load_balancing.selection_policy.policy").String(); policy {
		case "":
			var err error
			raw, err = sjson.SetRawBytes(slices.Clone(raw), "load_balancing.selection_policy", []byte(`{"policy":"vllm_least_load"}`))
			if err != nil {
				return nil, fmt.Errorf("setting the selection policy: %v", err)
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
		// room for the body as sent: the model name swapped, the stream
		// usage asked for
		raw, err = sjson.SetBytes(slices.Clone(raw), "request_buffers", maxBody+BodySlack)
		if err != nil {
			return nil, fmt.Errorf("setting request_buffers: %v", err)
		}
	}
	if grp.APIKey != "" {
		key := caddy.NewReplacer().ReplaceAll(grp.APIKey, "")
		grp.Run.key = key
		if key == "" {
			// an unset variable would send every request without
			// credentials, and every answer would be the cloud's 401
			return nil, fmt.Errorf("api_key %s resolves to an empty value: set it (is the environment variable exported?), or write api_key \"\" to send no credentials", grp.APIKey)
		}
		// the key goes into the proxy's own header operations, which act
		// on its copy of the request: it never touches the request the
		// access log sees (Anthropic's API reads it from x-api-key)
		name, value := "Authorization", "Bearer "+key
		if grp.Kind == KindAnthropic {
			name, value = "X-Api-Key", key
		}
		var err error
		if raw, err = setHeader(slices.Clone(raw), name, value); err != nil {
			return nil, fmt.Errorf("setting api_key: %v", err)
		}
	}
	if grp.Kind == KindAnthropic {
		// its API refuses a request without its version, key or not
		var err error
		if raw, err = setHeader(slices.Clone(raw), "Anthropic-Version", anthropicVersion); err != nil {
			return nil, fmt.Errorf("setting anthropic-version: %v", err)
		}
	}
	return raw, nil
}

// setHeader sets header h of the proxy's requests to v, and of its active
// health checks: they send none of its header operations, only their own,
// so that an API's GET /v1/models, which wants the key, is the check;
// unless the checks set h themselves or go to another host (their
// upstream).
func setHeader(raw []byte, h, v string) ([]byte, error) {
	raw, err := sjson.SetBytes(raw, "headers.request.set."+h, []string{v})
	if err != nil {
		return nil, err
	}
	if active := gjson.GetBytes(raw, "health_checks.active"); active.Exists() && !active.Get("upstream").Exists() && !hasHeader(active.Get("headers"), h) {
		return sjson.SetBytes(raw, "health_checks.active.headers."+h, []string{v})
	}
	return raw, nil
}

// hasHeader reports whether a JSON object of headers names h, in any case.
func hasHeader(headers gjson.Result, h string) bool {
	found := false
	headers.ForEach(func(k, _ gjson.Result) bool {
		found = strings.EqualFold(k.String(), h)
		return !found
	})
	return found
}

// Cleanup releases what the group holds in shared state.
// The endpoints map stays: requests of an unloaded config may still be
// in flight, and a released prober's data merely goes stale.
func (grp *Group) Cleanup() {
	if grp == nil {
		return
	}
	if grp.Run.sharedKey != "" {
		_ = groupStates.Release(grp.Run.sharedKey)
		grp.Run.sharedKey = ""
	}
	if grp.VLLM == nil || grp.VLLM.released {
		return
	}
	grp.VLLM.released = true
	grp.VLLM.releaseAdded()
	for _, ep := range grp.VLLM.Endpoints {
		probe.Release(ep.Prober, grp)
	}
}

// DefaultRetries is how many more attempts a target on the group gets by
// default: one on a vllm group that has or may have several endpoints
// (dynamic upstreams, or a registry that lists more than the config), so
// that a failing replica hands the request to a healthy one rather than
// to the next target (the cloud); none elsewhere.
func (grp *Group) DefaultRetries(registry bool) int {
	if grp.Kind == KindVLLM && (len(grp.Run.Proxy.Upstreams) > 1 || grp.Run.Proxy.DynamicUpstreams != nil || registry) {
		return 1
	}
	return 0
}

// CloseIdleConnections drops the pooled connections of the group's
// transport.
func (grp *Group) CloseIdleConnections() {
	if ht, ok := grp.Run.Proxy.Transport.(*reverseproxy.HTTPTransport); ok && ht.Transport != nil {
		ht.Transport.CloseIdleConnections()
	}
}

// ProbesDown reports whether the group's health checks find every one of
// its endpoints down: the probes of a vllm group, Caddy's active health
// checks (`health_uri`) of an openai group. Without health checks it is
// never down.
func (grp *Group) ProbesDown() bool {
	if vg := grp.VLLM; vg != nil {
		seen := false
		for ep := range vg.All() { // the registry's endpoints too
			if ep.Prober.Snapshot().Health != probe.HealthDown {
				return false
			}
			seen = true
		}
		return seen
	}
	hc := grp.Run.Proxy.HealthChecks
	if hc == nil || hc.Active == nil || len(grp.Run.Proxy.Upstreams) == 0 {
		return false
	}
	for _, u := range grp.Run.Proxy.Upstreams {
		if u.Healthy() {
			return false
		}
	}
	return true
}

func (grp *Group) AcquireShared(key string) {
	grp.Shared, _, _ = groupStates.Acquire(key, func() (*GroupState, error) {
		return NewGroupState(), nil
	})
	grp.Run.sharedKey = key
}
