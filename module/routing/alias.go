// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package routing

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/hybridllm/caddy-hybrid-llm/module/because"
	"github.com/hybridllm/caddy-hybrid-llm/module/clock"
	"github.com/hybridllm/caddy-hybrid-llm/module/priority"
	"github.com/hybridllm/caddy-hybrid-llm/module/upstream"
	"go.uber.org/zap"
)

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

	// Settings of the alias's weighted sets, by set name.
	Sets map[string]*SetConfig `json:"sets,omitempty"`

	// The degradation chain of the alias's tiers (targets with `tier`):
	// its cap, triggers and marking. Default, when the alias has tiers:
	// a cap of 20 % over a minute, the KV-cache trigger at 85 %.
	Degrade *DegradeConfig `json:"degrade,omitempty"`

	// Colored canaries: requests tagged with a color's X-Route-Tag, from
	// a trusted source, go to its target.
	Colors []*Color `json:"colors,omitempty"`

	// Mirrors: each gets a copy of a sampled share of the alias's
	// requests, whose answer is metered as shadow traffic and thrown
	// away.
	Mirrors []*Mirror `json:"mirrors,omitempty"`

	Name         string         `json:"-"`
	Chain        *DegradeChain  `json:"-"` // with tiers
	ModelJSON    []byte         `json:"-"` // the name as a JSON string, when answers carry it
	WeightedSets []*WeightedSet `json:"-"` // runs of targets served by weight
}

// Target is one entry of an alias: a group plus the model name that
// group serves.
type Target struct {
	// The name of the group.
	Group string `json:"group,omitempty"`

	Pos string `json:"-"` // in a Caddyfile: where it is, for errors

	// The model name the group serves for this alias; the request's
	// `model` is rewritten to it for this target only.
	Model string `json:"model,omitempty"`

	// An attempt's time limits and retries.
	AttemptLimits

	// The target's context window in tokens; default: for a vllm group,
	// the smallest max_model_len its endpoints report for the model.
	// A request whose estimated prompt plus max_tokens does not fit
	// skips the target.
	ContextWindow int `json:"context_window,omitempty"`

	// The upstream statuses that move the request to the next target
	// instead of reaching the client: statuses from 400 to 599, or 4 or
	// 5 for a whole class (as in Caddy's status matchers). Replaces the
	// default: 401, 403, 408, 429 and 5 (every 5xx). A 404 that says the
	// model does not exist falls back whatever the set (logged as
	// model_not_found; on a vllm endpoint it marks the endpoint
	// misconfigured); 404 in the set makes any 404 fall back.
	FallbackOn []int `json:"fallback_on,omitempty"`

	// The weighted set the target belongs to: targets next to each other
	// with the same set name are served active-active, each request
	// starting at a member picked by smooth weighted round robin and
	// falling back to the other members, heaviest first, before the
	// targets after the set. Default: none (an ordered target).
	Set string `json:"set,omitempty"`

	// The target's weight in its set; 0 takes no new requests (a set
	// whose members are all at 0 is passed over). Default: 1.
	Weight *int `json:"weight,omitempty"`

	// Health-score scheduling of the target in its weighted set: its
	// weight moves to the other members while its error rate or p99 is
	// over a threshold or its health checks fail. A set in which one
	// member has it watches every member (the others with the
	// defaults). Default: none.
	Health *HealthConfig `json:"health,omitempty"`

	// Marks the target as a degraded tier of its alias (see
	// DegradeConfig): it takes what the targets before it cannot serve,
	// its answers marked degraded. Default: none.
	Tier *TierConfig `json:"tier,omitempty"`

	// The target's latency objective for the degradation chain's latency
	// trigger (p99 time to first token), instead of the alias's.
	SLO caddy.Duration `json:"slo,omitempty"`

	Upstream *upstream.Group `json:"-"`
	Trigger  *DegradeTrigger `json:"-"` // with a tier after it, in a vllm group
	Run      TargetRun       `json:"-"` // resolved from the config as it is provisioned
	Seen     targetSeen      `json:"-"` // what it has seen of its attempts
}

// AttemptLimits bound each attempt on a target.
type AttemptLimits struct {
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

	// The longest a started response may go without a body read from the
	// upstream, counted from its response head (a stream's first body
	// byte, when first_byte_timeout holds it until then); like nginx's
	// proxy_read_timeout. Passing it ends a stream with an SSE error
	// event (stream_interrupted, "the upstream sent nothing for ...") and
	// aborts any other answer, and counts as a failure of the upstream for
	// its breakers: a wedged or frozen upstream that keeps its connection
	// open does not keep the client waiting until timeout. A client that
	// reads slowly is not an idle upstream. Mirror copies are bounded by
	// their timeout alone. Default: 60s; 0 means no limit.
	IdleTimeout *caddy.Duration `json:"idle_timeout,omitempty"`

	// Further attempts on this target after a failure before the next
	// target is tried; on a vllm group they avoid the endpoints that
	// failed. Default: 1 on a vllm group of several endpoints (a replica
	// that fails hands the request to another, not to the next target),
	// else 0.
	Retries *int `json:"retries,omitempty"`
}

// TargetRun is a target's runtime, resolved from its config.
type TargetRun struct {
	Timeout    time.Duration // 0: none
	FirstByte  time.Duration // 0: none
	Idle       time.Duration // 0: none
	IdleCause  string        // what an idle cut tells the client
	Retries    int
	fallbackOn statusSet
	ModelJSON  []byte
	SameName   bool
	// with vLLM's priority field sent (see priority.Config): ModelJSON
	// and the field after it, by class
	ClassModelJSON *[3][]byte
	Gates          []Gate // what it passes before an attempt (see TargetKit.GatesOf)
	Observers      []AttemptObserver
}

// targetSeen is what a target keeps of its attempts: its configuration
// faults, its metric series, and its place in its set's health and
// latency.
type targetSeen struct {
	faults   faultLog
	Metrics  *TargetMetrics
	byClient sync.Map       // client name -> *TargetMetrics
	Health   *HealthMember  // its set's scheduler, if watched
	latency  *memberLatency // its recent latencies, for its set's strategy
}

// AliasSetup is what provisioning a gateway's aliases reads of the
// gateway, and what it gathers for it.
type AliasSetup struct {
	Gateway       string
	Groups        map[string]*upstream.Group
	Clients       bool   // clients are configured
	Registry      bool   // a registry is configured
	ResponseModel string // the gateway's response_model
	Clock         clock.Clock
	Logger        *zap.Logger

	Used            map[string]bool // the groups the targets name
	Watch           watchedFields   // the top-level fields route rules read
	RuleCredentials bool            // a route rule reads a credential header
}

// Provision checks the alias and sets up its targets and routes.
func (s *AliasSetup) Provision(name string, al *Alias) error {
	if name == "" {
		return fmt.Errorf("alias with an empty name")
	}
	if al == nil || len(al.Targets) == 0 {
		return fmt.Errorf("alias %q: no targets", name)
	}
	al.Name = name
	if err := CheckResponseModel(al.ResponseModel); err != nil {
		return fmt.Errorf("alias %q: %v", name, err)
	}
	if answersCarryAlias(al.ResponseModel, s.ResponseModel) {
		al.ModelJSON, _ = json.Marshal(name)
	}
	for i, t := range al.Targets {
		if t == nil {
			return fmt.Errorf("alias %q: target %d: empty", name, i)
		}
		if err := s.target(al, t); err != nil {
			return fmt.Errorf("alias %q: target %d (group %q): %v", name, i, t.Group, err)
		}
	}
	if err := al.provisionSets(s.Gateway); err != nil {
		return fmt.Errorf("alias %q: %v", name, err)
	}
	for set := range al.Sets {
		if !slices.ContainsFunc(al.WeightedSets, func(ws *WeightedSet) bool { return ws.Name == set }) {
			return fmt.Errorf("alias %q: settings for set %q, which it does not have", name, set)
		}
	}
	for _, ws := range al.WeightedSets {
		if err := provisionStrategy(al, ws, s.Logger); err != nil {
			return fmt.Errorf("alias %q: %v", name, err)
		}
		if err := provisionHealth(s.Gateway, s.Clock, s.Logger, al, ws); err != nil {
			return fmt.Errorf("alias %q: %v", name, err)
		}
		if ws.health == nil {
			ws.serveLocked() // leaned by the strategy, if any; nothing runs yet
		}
	}
	if err := provisionChain(al); err != nil {
		return fmt.Errorf("alias %q: %v", name, err)
	}
	if err := s.colors(al); err != nil {
		return fmt.Errorf("alias %q: %v", name, err)
	}
	if err := s.mirrors(al); err != nil {
		return fmt.Errorf("alias %q: %v", name, err)
	}
	for _, r := range al.Routes {
		if r == nil {
			return fmt.Errorf("alias %q: empty route", name)
		}
		if err := r.Provision(s, al); err != nil {
			return fmt.Errorf("alias %q: %v", name, err)
		}
	}
	return nil
}

// target checks a target of the alias (one of its targets, a
// color's or a mirror's) and resolves its group, limits and metrics.
func (s *AliasSetup) target(al *Alias, t *Target) error {
	grp, ok := s.Groups[t.Group]
	if !ok {
		return fmt.Errorf("unknown group %q", t.Group)
	}
	if t.Model == "" {
		return fmt.Errorf("a model name is required")
	}
	if (t.Retries != nil && *t.Retries < 0) || t.ContextWindow < 0 {
		return fmt.Errorf("retries and context_window must not be negative")
	}
	if err := t.ProvisionLimits(); err != nil {
		return err
	}
	codes := t.FallbackOn
	if codes == nil {
		codes = defaultFallbackOn
	}
	set, err := newStatusSet(codes)
	if err != nil {
		return err
	}
	t.Run.fallbackOn = set
	t.Upstream = grp
	t.Run.Retries = grp.DefaultRetries(s.Registry)
	if t.Retries != nil {
		t.Run.Retries = *t.Retries
	}
	t.Run.ModelJSON, _ = json.Marshal(t.Model)
	if c := grp.Classes; c != nil && c.Priority {
		t.Run.ClassModelJSON = new([3][]byte)
		for cls := range t.Run.ClassModelJSON {
			t.Run.ClassModelJSON[cls] = fmt.Appendf(nil, `%s,"priority":%d`, t.Run.ModelJSON, priority.Class(cls).VLLM())
		}
	}
	t.Seen.Metrics = NewTargetMetrics(s.Gateway, al.Name, t, "")
	t.Run.SameName = t.Model == al.Name
	s.Used[t.Group] = true
	return nil
}

// EquipTargets gives every target a request may be sent to its gates
// and its attempts' observers, once the books they use are provisioned.
func EquipTargets(k TargetKit, aliases map[string]*Alias) {
	for _, al := range aliases {
		for _, t := range al.Targets {
			t.Run.Gates, t.Run.Observers = k.GatesOf(t), k.ObserversOf(t)
			if al.Chain != nil {
				t.Run.Gates = k.ChainGates(al.Chain, al.Name, t, t.Run.Gates)
			}
		}
		for _, c := range al.Colors {
			c.Target.Run.Gates, c.Target.Run.Observers = k.GatesOf(&c.Target), k.ObserversOf(&c.Target)
		}
	}
}

// Attempt limits when a target sets none. A non-stream answer starts only
// when its generation ends, so the whole attempt gets minutes; a stream's
// first token (queueing and prefill) should come within a minute, and so
// should each read of a started answer (nginx's proxy_read_timeout).
const (
	DefaultAttemptTimeout   = 10 * time.Minute
	DefaultFirstByteTimeout = 60 * time.Second
	DefaultIdleTimeout      = 60 * time.Second
)

// ProvisionLimits resolves the target's time limits: unset is the
// default, 0 is none.
func (t *Target) ProvisionLimits() error {
	for _, l := range []struct {
		name string
		set  *caddy.Duration
		def  time.Duration
		dst  *time.Duration
	}{
		{"timeout", t.Timeout, DefaultAttemptTimeout, &t.Run.Timeout},
		{"first_byte_timeout", t.FirstByteTimeout, DefaultFirstByteTimeout, &t.Run.FirstByte},
		{"idle_timeout", t.IdleTimeout, DefaultIdleTimeout, &t.Run.Idle},
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
	if t.Run.Idle > 0 {
		t.Run.IdleCause = "the upstream sent nothing for " + seconds(t.Run.Idle)
	}
	return nil
}

// LimitOf returns the target's time limit of that name: timeout,
// first_byte_timeout or idle_timeout.
func (t *Target) LimitOf(name string) **caddy.Duration {
	switch name {
	case "timeout":
		return &t.Timeout
	case "first_byte_timeout":
		return &t.FirstByteTimeout
	}
	return &t.IdleTimeout
}

// seconds writes a duration as a user wrote it: whole seconds as 60s
// (not 1m0s), anything else as Go does (300ms).
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// FallsBackOn reports whether an upstream answer with this status moves
// the request to the next target.
func (t *Target) FallsBackOn(status int) bool {
	return t.Run.fallbackOn.has(status)
}

// Window returns the target's context window in tokens: its
// configured one, or the smallest max_model_len its group's endpoints
// report for the model; 0 when unknown.
func (t *Target) Window() int {
	if t.ContextWindow > 0 {
		return t.ContextWindow
	}
	vg := t.Upstream.VLLM
	if vg == nil {
		return 0
	}
	window := 0
	for ep := range vg.All() {
		if n := ep.Prober.Snapshot().Models[t.Model]; n > 0 && (window == 0 || n < window) {
			window = n
		}
	}
	return window
}

// TakenOut says why nothing may go to a target, whatever the request: its
// group is drained, its cloud's model list lacks the name, or the cloud
// asked to be left alone (a 429).
func (t *Target) TakenOut(c clock.Clock) Reason {
	if t.Upstream.Shared.Drained.Load() {
		return because.Drained
	}
	if t.Upstream.Check.Lacks(t.Model) {
		return because.Misconfig // the cloud's model list lacks the name
	}
	if t.Upstream.VLLM == nil && t.Upstream.Shared.Breaker.HeldNow(c) {
		return because.RateLimited
	}
	return ""
}
