// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package adminapi

import "time"

// The state document served at GET /hybrid_llm/state. Field names are a
// stable, documented schema (README: "Admin API").

// StateDoc is the whole state.
type StateDoc struct {
	// the Caddy process that answered, so that a person can tell which
	// one a default admin address reached
	Process  *ProcessState  `json:"process,omitempty"`
	Gateways []GatewayState `json:"gateways"`
}

// ProcessState names the Caddy process that answered.
type ProcessState struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
	// Caddy's version
	Version string `json:"version"`
}

// GatewayState is one gateway.
type GatewayState struct {
	Name    string       `json:"name"`
	Aliases []AliasState `json:"aliases"`
	Groups  []GroupState `json:"groups"`
	// with a registry: what the gateway last applied of it
	Registry *RegistryState `json:"registry,omitempty"`
}

// RegistryState is the shared registry as the gateway sees it.
type RegistryState struct {
	Prefix   string `json:"prefix"`
	Revision int64  `json:"revision"`
	// this process's member key, and the live members (this one
	// included) each endpoint's red line is split among
	Member  string `json:"member"`
	Members int    `json:"members"`
	// full reads of the prefix so far (the first, then one after each
	// compaction or change of etcd's history)
	Resyncs int64 `json:"resyncs"`
	// when etcd last answered, and how long ago: how stale the snapshot
	// applied may be; null before it ever answered
	LastContact  *time.Time `json:"last_contact"`
	StaleSeconds *float64   `json:"stale_seconds"`
}

// AliasState is one alias and its targets in order.
type AliasState struct {
	Name    string        `json:"name"`
	Targets []TargetState `json:"targets"`
	// with tiers: the degradation chain's share, cap and triggers
	Degrade *DegradeState `json:"degrade,omitempty"`
}

// DegradeState is an alias's degradation chain now.
type DegradeState struct {
	// degraded answers among the answered requests of the window
	Share      float64 `json:"share"`
	Answered   int     `json:"answered"`
	Degraded   int     `json:"degraded"`
	Cap        float64 `json:"cap"`
	CapReached bool    `json:"cap_reached"`
	// the upper targets' triggers
	Triggers []DegradeTriggerState `json:"triggers"`
}

// DegradeTriggerState is one upper target's trigger.
type DegradeTriggerState struct {
	Group    string             `json:"group"`
	Model    string             `json:"model"`
	Active   bool               `json:"active"`
	Reason   string             `json:"reason,omitempty"`
	Since    string             `json:"since,omitempty"`
	Why      string             `json:"why,omitempty"`
	Metadata map[string]float64 `json:"metadata,omitempty"`
}

// TargetState is one target of an alias.
type TargetState struct {
	Group string `json:"group"`
	Model string `json:"model"`
	// the attempt limits in effect; absent when there is none
	TimeoutSeconds          float64 `json:"timeout_seconds,omitempty"`
	FirstByteTimeoutSeconds float64 `json:"first_byte_timeout_seconds,omitempty"`
	IdleTimeoutSeconds      float64 `json:"idle_timeout_seconds,omitempty"`
	// further attempts on the target after a failure, default included
	Retries int `json:"retries"`
	// in a weighted set: its name, the member's weight now and in the
	// config
	Set              string `json:"set,omitempty"`
	Weight           *int   `json:"weight,omitempty"`
	ConfiguredWeight *int   `json:"configured_weight,omitempty"`
	// the set's strategy, when it has one other than weighted
	Strategy string `json:"strategy,omitempty"`
	// a degraded tier: its quality, max_tokens and formats
	Tier *TierState `json:"tier,omitempty"`
	// health-score scheduling, when the set's members are watched
	Health *TargetHealthState `json:"health,omitempty"`
}

// TierState is a degraded tier's settings, as its target's config
// (hybridllm's TierConfig) gives them.
type TierState struct {
	// Its quality relative to the upper targets, 0 to 1; reported.
	Quality *float64 `json:"quality,omitempty"`

	// The longest answer it is asked for: a request asking for more (or
	// not saying) is sent with this, and the answer says so.
	MaxTokens int `json:"max_tokens,omitempty"`

	// The structured outputs it produces reliably: `json_schema`,
	// `json_object`, `tools`. A request that needs one goes only to
	// tiers that list it. Default: none.
	Formats []string `json:"formats,omitempty"`
}

// TargetHealthState is a weighted set member's health, as its set's
// scheduler sees it.
type TargetHealthState struct {
	// ok, alert, recovering (in service at part of its weight), degraded
	// or broken (out)
	Level string `json:"level"`
	Since string `json:"since"`
	// over a threshold but kept in service: the last member in service,
	// or the most the set may take out at once
	Sick bool `json:"sick,omitempty"`
	// every member is sick: traffic goes to all by weight
	Panic bool `json:"panic,omitempty"`
	// the window's numbers at the last evaluation
	ErrorRate float64 `json:"error_rate"`
	P99Ms     int64   `json:"p99_ms"`
	Requests  int     `json:"requests"`
	Inflight  int64   `json:"inflight"`
}

// GroupState is one group.
type GroupState struct {
	Name       string           `json:"name"`
	Kind       string           `json:"kind"`
	MaxNumSeqs int              `json:"max_num_seqs,omitempty"`
	MaxQueue   int              `json:"max_queue,omitempty"`
	Models     []string         `json:"models"`
	Endpoints  []EndpointState  `json:"endpoints,omitempty"`
	ModelCheck *ModelCheckState `json:"model_check,omitempty"`
	Overflow   *OverflowState   `json:"overflow,omitempty"`
	Drained    bool             `json:"drained"`
	Breaker    *BreakerState    `json:"breaker,omitempty"`
	// until when the group (kind openai) gets no request, as its 429
	// with Retry-After asked; absent when it is not held
	RateLimitedUntil *time.Time `json:"rate_limited_until,omitempty"`
	// with priority classes (kind vllm): each class's share of the red
	// line and the sheddable requests waiting
	Classes *ClassesState `json:"classes,omitempty"`
}

// ClassesState is a vLLM group's priority classes now.
type ClassesState struct {
	Shares    map[string]float64 `json:"shares"` // of each endpoint's red line, by class
	Priority  bool               `json:"priority"`
	Queued    int                `json:"queued"` // sheddable requests waiting for a slot
	QueueSize int                `json:"queue_size"`
}

// OverflowState is a group's overflow controller and its signals now.
type OverflowState struct {
	Active bool       `json:"active"`
	Since  *time.Time `json:"since"`
	// the last transition's cause, e.g. "waiting=12 > 8"
	Reason      string   `json:"reason"`
	Transitions int64    `json:"transitions"`
	Waiting     *float64 `json:"waiting"`
	TTFTP99     *float64 `json:"ttft_p99_seconds"`
	KVUsage     *float64 `json:"kv_cache_usage"`
	InFlight    float64  `json:"in_flight"`
}

// BreakerState is a breaker at the time of the document: "closed",
// "open" (until open_until) or "half_open" (its cooldown is over: the
// next request is its trial, and trial says one is in flight).
type BreakerState struct {
	State     string     `json:"state"`
	OpenUntil *time.Time `json:"open_until,omitempty"`
	Trial     bool       `json:"trial,omitempty"`
	Opened    int64      `json:"opened"`
}

// EndpointState is one endpoint of a vLLM group, as its prober sees it.
type EndpointState struct {
	Address string `json:"address"`
	Probed
	Drained  bool  `json:"drained"`
	InFlight int64 `json:"in_flight"`
	// the most requests this gateway keeps in flight to the endpoint
	// (with a registry, its share among the live gateways; -1 when the
	// share is none); absent without a limit
	RedLine int64         `json:"red_line,omitempty"`
	Breaker *BreakerState `json:"breaker,omitempty"`
	// until when the endpoint gets no request, as its 429 with
	// Retry-After asked; absent when it is not held
	RateLimitedUntil *time.Time `json:"rate_limited_until,omitempty"`
	Weight           float64    `json:"weight"`
	// listed by the registry, not the config
	Added   bool         `json:"added,omitempty"`
	Metrics MetricsState `json:"metrics"`
	// with the group's health: the endpoint's health-score level and
	// window, and the share of a whole endpoint it serves at, in percent
	HealthScore  *TargetHealthState `json:"health_score,omitempty"`
	ServePercent *int               `json:"serve_percent,omitempty"`
}

// Probed is what an endpoint's probes found: its health and the models
// it serves.
type Probed struct {
	// "up", "down" or "unknown" (not probed yet)
	Health      string `json:"health"`
	HealthError string `json:"health_error,omitempty"`
	// expected model names this endpoint does not serve: non-empty means
	// misconfigured (excluded from routing for those names)
	Misconfigured []string `json:"misconfigured"`
	// served model names with their max_model_len; null before the
	// first successful /v1/models
	ServedModels map[string]int `json:"served_models"`
	ModelsError  string         `json:"models_error,omitempty"`
}

// MetricsState is the last /metrics scrape of an endpoint.
type MetricsState struct {
	Fresh          bool     `json:"fresh"`
	AgeSeconds     *float64 `json:"age_seconds"`
	Waiting        float64  `json:"waiting"`
	Running        float64  `json:"running"`
	KVCacheUsage   *float64 `json:"kv_cache_usage"`
	TTFTP50Seconds *float64 `json:"ttft_p50_seconds"`
	TTFTP99Seconds *float64 `json:"ttft_p99_seconds"`
	// the prefix cache's hit rate since the server started: the prompt
	// tokens it served of those it was asked (vLLM's
	// prefix_cache_hits_total / prefix_cache_queries_total); null when
	// not reported
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate"`
	Error              string   `json:"error,omitempty"`
}

// ModelCheckState is the last model name check of a cloud group.
type ModelCheckState struct {
	CheckedAt *time.Time `json:"checked_at"`
	Missing   []string   `json:"missing"`
	Error     string     `json:"error,omitempty"`
}
