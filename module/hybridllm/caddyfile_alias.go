// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

package hybridllm

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/hybridllm/caddy-hybrid-llm/module/caddyargs"
	"github.com/hybridllm/caddy-hybrid-llm/module/routing"
)

// unmarshalAlias parses an alias block; its syntax is in the doc of
// Gateway.UnmarshalCaddyfile.
func unmarshalAlias(d *caddyfile.Dispenser) (*routing.Alias, error) {
	al := new(routing.Alias)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "target":
			err = appendParsed(d, &al.Targets, unmarshalTarget)
		case "tier":
			err = appendParsed(d, &al.Targets, unmarshalTier)
		case "color":
			err = appendParsed(d, &al.Colors, unmarshalColor)
		case "mirror":
			err = appendParsed(d, &al.Mirrors, unmarshalMirror)
		case "route":
			err = appendParsed(d, &al.Routes, unmarshalRule)
		case "degrade":
			if al.Degrade != nil {
				return nil, d.Err("degrade already specified")
			}
			al.Degrade, err = unmarshalDegrade(d)
		case "weighted":
			err = unmarshalWeighted(d, al)
		case "response_model":
			if al.ResponseModel != "" {
				return nil, d.Err("response_model already specified")
			}
			al.ResponseModel, err = parseResponseModel(d)
		default:
			err = caddyargs.UnknownOption(d, "alias subdirective", d.Val(), "color", "degrade", "mirror", "response_model", "route", "target", "tier", "weighted")
		}
		if err != nil {
			return nil, err
		}
	}
	return al, nil
}

// appendParsed parses one of an alias's repeatable subdirectives and
// appends it to list.
func appendParsed[T any](d *caddyfile.Dispenser, list *[]T, parse func(*caddyfile.Dispenser) (T, error)) error {
	v, err := parse(d)
	if err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

// unmarshalWeighted parses a weighted set into the alias's targets and
// sets:
//
//	weighted [<name>] { [strategy ...] [health {...}] target ... { weight <n> } ... }
func unmarshalWeighted(d *caddyfile.Dispenser, al *routing.Alias) error {
	name := "set" + strconv.Itoa(len(al.Targets))
	if d.NextArg() {
		name = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	first := len(al.Targets)
	var setHealth *routing.HealthConfig
	for sn := d.Nesting(); d.NextBlock(sn); {
		switch d.Val() {
		case "strategy":
			if err := unmarshalStrategy(d, al, name); err != nil {
				return err
			}
		case "health":
			if setHealth != nil {
				return d.Err("health already specified")
			}
			hc, err := unmarshalHealth(d)
			if err != nil {
				return err
			}
			setHealth = hc
		case "target":
			t, err := unmarshalSetTarget(d)
			if err != nil {
				return err
			}
			t.Set = name
			al.Targets = append(al.Targets, t)
		default:
			if s := caddyargs.Suggest(d.Val(), []string{"target", "strategy", "health"}); s != "" {
				return d.Errf("a weighted set holds targets, a strategy and a health block only, got '%s' (did you mean '%s'?)", d.Val(), s)
			}
			return d.Errf("a weighted set holds targets, a strategy and a health block only, got '%s'", d.Val())
		}
	}
	if len(al.Targets) == first {
		return d.Errf("weighted set '%s' has no targets", name)
	}
	if setHealth != nil {
		// a member's own block keeps the set's values it leaves unset
		for _, t := range al.Targets[first:] {
			t.Health = setHealth.Under(t.Health)
		}
	}
	return nil
}

// unmarshalStrategy parses a weighted set's strategy.
func unmarshalStrategy(d *caddyfile.Dispenser, al *routing.Alias, set string) error {
	if al.Sets[set] != nil {
		return d.Err("strategy already specified")
	}
	var v string
	if !d.AllArgs(&v) {
		return d.Err("strategy needs one of weighted, latency, cost")
	}
	if v != routing.StrategyWeighted && v != routing.StrategyLatency && v != routing.StrategyCost {
		return d.Errf("unknown strategy '%s': want weighted, latency or cost", v)
	}
	if al.Sets == nil {
		al.Sets = make(map[string]*routing.SetConfig)
	}
	al.Sets[set] = &routing.SetConfig{Strategy: v}
	return nil
}

// unmarshalRule parses a pre-routing rule. Syntax:
//
//	route <group> {
//		prompt_tokens_over <n>
//		max_tokens_over    <n>
//		header             <name> <value>
//		field              <name>
//	}
func unmarshalRule(d *caddyfile.Dispenser) (*routing.Rule, error) {
	r := &routing.Rule{Pos: posOf(d)}
	if !d.Args(&r.Group) {
		return nil, d.Err("route needs the group of the target to send matching requests to")
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "prompt_tokens_over":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return nil, err
			}
			r.PromptTokensOver = n
		case "max_tokens_over":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return nil, err
			}
			r.MaxTokensOver = n
		case "header":
			var name, value string
			if !d.AllArgs(&name, &value) {
				return nil, d.Err("header needs a name and a value")
			}
			if r.Header == nil {
				r.Header = make(map[string]string)
			}
			r.Header[name] = value
		case "field":
			var name string
			if !d.AllArgs(&name) {
				return nil, d.Err("field needs one top-level JSON field name")
			}
			r.Fields = append(r.Fields, name)
		default:
			return nil, caddyargs.UnknownOption(d, "route condition", d.Val(), "field", "header", "max_tokens_over", "prompt_tokens_over")
		}
	}
	if r.PromptTokensOver == 0 && r.MaxTokensOver == 0 && len(r.Header) == 0 && len(r.Fields) == 0 {
		return nil, d.Errf("route %s has no condition", r.Group)
	}
	return r, nil
}

// parseFallbackOn parses the statuses of fallback_on: each a 4xx or 5xx
// status, or `4xx` or `5xx` for a whole class (stored as 4 or 5, as
// Caddy's status matchers do).
func parseFallbackOn(d *caddyfile.Dispenser) ([]int, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.Err("fallback_on needs at least one status, e.g. fallback_on 429 5xx")
	}
	codes := make([]int, 0, len(args))
	for _, a := range args {
		var c int
		switch a {
		case "4xx":
			c = 4
		case "5xx":
			c = 5
		default:
			n, err := strconv.Atoi(a)
			if err != nil || n < 400 || n > 599 {
				return nil, d.Errf("invalid fallback_on status '%s': want a 4xx or 5xx status, or 4xx or 5xx", a)
			}
			c = n
		}
		codes = append(codes, c)
	}
	return codes, nil
}

// unmarshalColor parses a colored canary. Syntax:
//
//	color <tag> <group> <model> [{
//		fallback        on|off
//		trusted_clients <name...>
//		trusted_ranges  <cidr...>
//		# and every target subdirective
//	}]
func unmarshalColor(d *caddyfile.Dispenser) (*routing.Color, error) {
	c := new(routing.Color)
	if !d.NextArg() {
		return nil, d.Err("color needs a tag, a group and a model name: color <tag> <group> <model>")
	}
	c.Tag = d.Val()
	err := unmarshalTargetInto(d, &c.Target, "color", targetExtra{names: []string{"fallback", "trusted_clients", "trusted_ranges"}, parse: func(d *caddyfile.Dispenser) (bool, error) {
		switch d.Val() {
		case "fallback":
			on, err := caddyargs.OnOff(d)
			c.Fallback = &on
			return true, err
		case "trusted_clients":
			c.TrustedClients = append(c.TrustedClients, d.RemainingArgs()...)
			return true, nil
		case "trusted_ranges":
			c.TrustedRanges = append(c.TrustedRanges, d.RemainingArgs()...)
			return true, nil
		}
		return false, nil
	}})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// unmarshalTier parses a degraded tier. Syntax:
//
//	tier <group> <model> [{
//		quality    <share>
//		max_tokens <n>
//		formats    json_schema|json_object|tools...
//		# and every target subdirective
//	}]
func unmarshalTier(d *caddyfile.Dispenser) (*routing.Target, error) {
	t := &routing.Target{Tier: new(routing.TierConfig)}
	err := unmarshalTargetInto(d, t, "tier", targetExtra{names: []string{"quality", "max_tokens", "formats"}, parse: func(d *caddyfile.Dispenser) (bool, error) {
		switch d.Val() {
		case "quality":
			v, err := caddyargs.Share(d)
			t.Tier.Quality = &v
			return true, err
		case "max_tokens":
			n, err := caddyargs.PositiveInt(d)
			t.Tier.MaxTokens = n
			return true, err
		case "formats":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return true, d.Err("formats needs at least one of json_schema, json_object, tools")
			}
			t.Tier.Formats = append(t.Tier.Formats, args...)
			return true, nil
		}
		return false, nil
	}})
	return t, err
}

// unmarshalDegrade parses an alias's degradation chain settings. Syntax:
//
//	degrade {
//		cap         <share>|off   # default 20%
//		window      <duration>    # default 1m
//		at_cap      refuse|allow
//		mark_body   on|off
//		slo         <duration>
//		slo_factor  <n>           # default 1.5
//		queue_depth <n>           # default 10
//		kv_cache    <share>|off   # default 85%
//		kv_window   <duration>    # default 5s
//		dwell       <duration>    # default 10s
//	}
func unmarshalDegrade(d *caddyfile.Dispenser) (*routing.DegradeConfig, error) {
	dc := new(routing.DegradeConfig)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch name := d.Val(); name {
		case "cap":
			var v float64
			v, err = caddyargs.ShareOr(d, "off", 1)
			dc.Cap = &v
		case "kv_cache":
			var v float64
			v, err = caddyargs.ShareOr(d, "off", 0)
			dc.KVCache = &v
		case "window":
			dc.Window, err = caddyargs.Duration(d)
		case "slo":
			dc.SLO, err = caddyargs.Duration(d)
		case "kv_window":
			dc.KVWindow, err = caddyargs.Duration(d)
		case "dwell":
			dc.Dwell, err = caddyargs.Duration(d)
		case "at_cap":
			if !d.AllArgs(&dc.AtCap) {
				return nil, d.Err("at_cap needs refuse or allow")
			}
		case "mark_body":
			dc.MarkBody, err = caddyargs.OnOff(d)
		case "slo_factor":
			dc.SLOFactor, err = caddyargs.PositiveFloat(d)
		case "queue_depth":
			dc.QueueDepth, err = caddyargs.PositiveFloat(d)
		default:
			return nil, caddyargs.UnknownOption(d, "degrade option", name, "at_cap", "cap", "dwell", "kv_cache", "kv_window", "mark_body", "queue_depth", "slo", "slo_factor", "window")
		}
		if err != nil {
			return nil, err
		}
	}
	return dc, nil
}

// unmarshalMirror parses a mirror. Syntax:
//
//	mirror <group> <model> {
//		ratio         <share>     # 10% or 0.1
//		max_in_flight <n>         # default 32
//		timeout       <duration>  # default 60s
//	}
func unmarshalMirror(d *caddyfile.Dispenser) (*routing.Mirror, error) {
	m := new(routing.Mirror)
	err := unmarshalTargetInto(d, &m.Target, "mirror", targetExtra{names: []string{"ratio", "max_in_flight"}, parse: func(d *caddyfile.Dispenser) (bool, error) {
		switch d.Val() {
		case "ratio":
			v, err := caddyargs.Share(d)
			m.Ratio = v
			return true, err
		case "max_in_flight":
			n, err := caddyargs.PositiveInt(d)
			m.MaxInFlight = n
			return true, err
		}
		return false, nil
	}})
	if err != nil {
		return nil, err
	}
	if m.Ratio == 0 {
		return nil, d.Errf("mirror %s %s needs a ratio over 0, e.g. ratio 10%%", m.Group, m.Model)
	}
	return m, nil
}

// unmarshalTarget parses `target <group> <model> [{ ... }]` outside a
// weighted set.
func unmarshalTarget(d *caddyfile.Dispenser) (*routing.Target, error) {
	t := new(routing.Target)
	return t, unmarshalTargetInto(d, t, "target", targetExtra{})
}

// unmarshalSetTarget parses a target of a weighted set, which may also
// take weight and health.
func unmarshalSetTarget(d *caddyfile.Dispenser) (*routing.Target, error) {
	t := new(routing.Target)
	return t, unmarshalTargetInto(d, t, "target", targetExtra{names: []string{"health", "weight"}, parse: func(d *caddyfile.Dispenser) (bool, error) {
		switch d.Val() {
		case "weight":
			n, err := caddyargs.NonNegativeInt(d)
			if err != nil {
				return true, err
			}
			t.Weight = &n
		case "health":
			if t.Health != nil {
				return true, d.Err("health already specified")
			}
			hc, err := unmarshalHealth(d)
			if err != nil {
				return true, err
			}
			t.Health = hc
		default:
			return false, nil
		}
		return true, nil
	}})
}

// targetExtra is what a weighted set, color, tier or mirror adds to a
// target's subdirectives.
type targetExtra struct {
	names []string // the subdirectives, for suggestions
	// parses the subdirective at d if it is one of them, reporting
	// whether it took it
	parse func(d *caddyfile.Dispenser) (took bool, err error)
}

// unmarshalTargetInto parses a target's group, model and block into t
// (or the same arguments of a color, tier or mirror, with their extra
// subdirectives); what names the directive in errors.
func unmarshalTargetInto(d *caddyfile.Dispenser, t *routing.Target, what string, extra targetExtra) error {
	t.Pos = posOf(d)
	if !d.Args(&t.Group, &t.Model) {
		return d.Errf("%s needs a group and a model name after its arguments: %s ... <group> <model>", what, what)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for tn := d.Nesting(); d.NextBlock(tn); {
		if extra.parse != nil {
			took, err := extra.parse(d)
			if err != nil {
				return err
			}
			if took {
				continue
			}
		}
		switch d.Val() {
		case "timeout", "first_byte_timeout", "idle_timeout":
			dst := t.LimitOf(d.Val())
			if *dst != nil {
				return d.Errf("%s already specified", d.Val())
			}
			dur, err := caddyargs.Limit(d)
			if err != nil {
				return err
			}
			*dst = dur
		case "slo":
			dur, err := caddyargs.Duration(d)
			if err != nil {
				return err
			}
			t.SLO = dur
		case "retries":
			n, err := caddyargs.NonNegativeInt(d)
			if err != nil {
				return err
			}
			t.Retries = &n
		case "context_window":
			n, err := caddyargs.PositiveInt(d)
			if err != nil {
				return err
			}
			t.ContextWindow = n
		case "fallback_on":
			if t.FallbackOn != nil {
				return d.Err("fallback_on already specified")
			}
			codes, err := parseFallbackOn(d)
			if err != nil {
				return err
			}
			t.FallbackOn = codes
		case "weight": // a weighted set's targets take it (see unmarshalSetTarget)
			return d.Err("weight belongs to a target in a weighted set")
		case "health":
			return d.Err("health belongs to a target in a weighted set")
		default:
			known := []string{"context_window", "fallback_on", "first_byte_timeout", "retries", "slo", "timeout"}
			return caddyargs.UnknownOption(d, what+" subdirective", d.Val(), append(known, extra.names...)...)
		}
	}
	return nil
}
